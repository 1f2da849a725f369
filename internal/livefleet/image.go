package livefleet

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// ImageName is the tag of the node image Build makes. It is kept between
// runs as a build cache and carries no fleetdrill labels.
const ImageName = "fleetdrill-node:livefleet"

// ImageEnv names an existing node image for Build to run instead of
// building one (Options.Image takes precedence).
const ImageEnv = "FLEETDRILL_NODE_IMAGE"

var (
	imageOnce sync.Once
	imageErr  error
	// ImageBuildTime is how long the one image build of this process took
	// (the go build plus the docker build); zero before it ran.
	imageBuildTime time.Duration
)

// ImageBuildTime reports how long this process's image build took, zero if
// it has not run (or Options.Image was used).
func ImageBuildTime() time.Duration { return imageBuildTime }

// setEnv sets the testcontainers settings these machines need, unless the
// environment already has them. testcontainers reads them once per process.
func setEnv() {
	for k, v := range map[string]string{
		"TESTCONTAINERS_RYUK_DISABLED": "true",
		"TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
	} {
		if _, ok := os.LookupEnv(k); !ok {
			os.Setenv(k, v)
		}
	}
}

// buildImage builds ImageName once per process.
func buildImage(ctx context.Context, moduleDir string, log io.Writer) error {
	imageOnce.Do(func() {
		start := time.Now()
		imageErr = doBuildImage(ctx, moduleDir, log)
		imageBuildTime = time.Since(start)
	})
	return imageErr
}

func doBuildImage(ctx context.Context, moduleDir string, log io.Writer) error {
	if moduleDir == "" {
		out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		if err != nil {
			return fmt.Errorf("livefleet: go env GOMOD: %w", err)
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			return fmt.Errorf("livefleet: not inside the fleetdrill module; set Options.ModuleDir")
		}
		moduleDir = filepath.Dir(gomod)
	}
	dir, err := os.MkdirTemp("", "fleetdrill-node-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "fleetdrill"), "./cmd/fleetdrill")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("livefleet: go build ./cmd/fleetdrill: %w\n%s", err, out)
	}
	df, err := os.ReadFile(filepath.Join(moduleDir, "internal", "node", "Dockerfile"))
	if err != nil {
		return fmt.Errorf("livefleet: node Dockerfile: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644); err != nil {
		return err
	}

	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("livefleet: docker provider: %w", err)
	}
	defer p.Close()
	repo, tag, _ := strings.Cut(ImageName, ":")
	if log == nil {
		log = io.Discard
	}
	_, err = p.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		Context: dir, Dockerfile: "Dockerfile", Repo: repo, Tag: tag, KeepImage: true, BuildLogWriter: log,
	}})
	if err != nil {
		return fmt.Errorf("livefleet: docker build: %w", err)
	}
	return nil
}
