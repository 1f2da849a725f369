package compare

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseVariant(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Variant
		wantErr string
	}{
		{in: "base", want: Variant{Name: "base"}},
		{in: "base=", want: Variant{Name: "base"}},
		{in: "hpa70=pools.web.autoscale.target=0.7", want: Variant{Name: "hpa70", Sets: []string{"pools.web.autoscale.target=0.7"}}},
		{in: "r4=pools.web.acquisition.reserved=4, pools.web.autoscale.min_replicas=4",
			want: Variant{Name: "r4", Sets: []string{"pools.web.acquisition.reserved=4", "pools.web.autoscale.min_replicas=4"}}},
		{in: `strict=expect=["a < 1", "b > 2"],duration=10m`,
			want: Variant{Name: "strict", Sets: []string{`expect=["a < 1", "b > 2"]`, "duration=10m"}}},
		{in: `d=description="a, b"`, want: Variant{Name: "d", Sets: []string{`description="a, b"`}}},
		{in: "=pools.web.replicas=2", wantErr: `name "": want letters`},
		{in: "two words=x=1", wantErr: `name "two words"`},
		{in: "v=pools.web.replicas", wantErr: `v: override "pools.web.replicas": want PATH=VALUE`},
		{in: "v=a=1,,b=2", wantErr: `v: override "": want PATH=VALUE`},
		{in: "v=seed=7", wantErr: "v: override \"seed=7\": a variant may not set the seed"},
		{in: "v=duration=5m, seed=7", wantErr: "may not set the seed"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseVariant(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr, "ParseVariant(%q)", tc.in)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got, "ParseVariant(%q)", tc.in)
		})
	}
}

// TestRunVariantsRefused: variants with policies, or two of one name, are
// refused before any run.
func TestRunVariantsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"with policies", Config{Policies: []string{"fifo"}, Variants: []Variant{{Name: "a"}, {Name: "b"}}, Seeds: 2},
			"both policies and variants"},
		{"name twice", Config{Variants: []Variant{{Name: "a"}, {Name: "a", Sets: []string{"duration=1m"}}}, Seeds: 2},
			`variant "a" given twice`},
		{"no name", Config{Variants: []Variant{{Name: "a"}, {}}, Seeds: 2}, "variant 1 has no name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t.Context(), nil, tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
