package trace

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file holds the allocation-free byte parsers the readers share. Each
// returns ok=false rather than an error: the caller knows the field name and
// builds the RowError.

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseUint parses a non-empty run of ASCII digits with no sign, spaces or
// leading '+'.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// maxCount bounds token and resource counts so that sums over a trace of a
// billion rows still fit in an int64.
const maxCount = math.MaxInt32

// parseCount parses a non-negative integer count no larger than maxCount.
func parseCount(b []byte) (int, bool) {
	n, ok := parseUint(b)
	if !ok || n > maxCount {
		return 0, false
	}
	return int(n), true
}

// parseIntegral parses a count written as an integer or as a float with a
// zero fraction ("63", "63.0"), as pandas writes integer columns that had
// missing values.
func parseIntegral(b []byte) (int, bool) {
	for i, c := range b {
		if c == '.' {
			if i == 0 {
				return 0, false
			}
			for _, z := range b[i+1:] {
				if z != '0' {
					return 0, false
				}
			}
			return parseCount(b[:i])
		}
	}
	return parseCount(b)
}

// parseSeconds parses a non-negative decimal number of seconds in JSON number
// syntax ("12", "0.5", "3435.948056", "1.5e-3") exactly, without going
// through a float: digits beyond nanosecond precision are rounded half up.
func parseSeconds(b []byte) (time.Duration, bool) {
	// value = digits × 10^exp, digits without leading zeros.
	var digits [40]byte
	nd, exp, i := 0, 0, 0
	seen := false
	for ; i < len(b) && isDigit(b[i]); i++ {
		seen = true
		switch {
		case nd == 0 && b[i] == '0':
		case nd < len(digits):
			digits[nd] = b[i]
			nd++
		default:
			exp++ // a digit past 40 significant ones: far out of range anyway
		}
	}
	if !seen || (b[0] == '0' && i > 1) { // JSON forbids leading zeros
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		frac := false
		for ; i < len(b) && isDigit(b[i]); i++ {
			frac = true
			if nd == 0 && b[i] == '0' {
				exp--
			} else if nd < len(digits) {
				digits[nd] = b[i]
				nd++
				exp--
			}
		}
		if !frac {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		e, start := 0, i
		for ; i < len(b) && isDigit(b[i]); i++ {
			if e < 10000 {
				e = e*10 + int(b[i]-'0')
			}
		}
		if i == start {
			return 0, false
		}
		if neg {
			e = -e
		}
		exp += e
	}
	if i != len(b) {
		return 0, false
	}
	if nd == 0 {
		return 0, true
	}
	// Scale to nanoseconds: value_ns = digits × 10^(exp+9).
	k := exp + 9
	keep := nd + k // digits that are at or above 1 ns
	if keep <= 0 {
		if keep == 0 && digits[0] >= '5' {
			return 1, true
		}
		return 0, true
	}
	var n uint64
	for j := 0; j < keep; j++ {
		d := uint64(0)
		if j < nd {
			d = uint64(digits[j] - '0')
		}
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if keep < nd && digits[keep] >= '5' {
		if n == math.MaxInt64 {
			return 0, false
		}
		n++
	}
	return time.Duration(n), true
}

// appendSeconds appends d (>= 0) as a decimal number of seconds with no
// trailing fractional zeros: the exact inverse of parseSeconds.
func appendSeconds(b []byte, d time.Duration) []byte {
	sec, ns := uint64(d)/1e9, uint64(d)%1e9
	b = appendUint(b, sec)
	if ns == 0 {
		return b
	}
	var frac [10]byte
	frac[0] = '.'
	for i := 9; i >= 1; i-- {
		frac[i] = byte('0' + ns%10)
		ns /= 10
	}
	n := 10
	for frac[n-1] == '0' {
		n--
	}
	return append(b, frac[:n]...)
}

func appendUint(b []byte, n uint64) []byte {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, buf[i:]...)
}

// ticksPerSecond: Azure timestamps carry 7 fractional digits, 100 ns ticks.
const ticksPerSecond = 10_000_000

// parseWallTime parses "YYYY-MM-DD HH:MM:SS[.f{1,7}][Z|±HH:MM]" (a 'T' may
// separate date and time) into 100 ns ticks since the Unix epoch, UTC. A time
// without a zone is taken as UTC. The fraction is read as an integer: no
// float is involved.
func parseWallTime(b []byte) (int64, bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != ' ' && b[10] != 'T') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	year, ok1 := fixedDigits(b[0:4])
	month, ok2 := fixedDigits(b[5:7])
	day, ok3 := fixedDigits(b[8:10])
	hour, ok4 := fixedDigits(b[11:13])
	minute, ok5 := fixedDigits(b[14:16])
	sec, ok6 := fixedDigits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || year < 1 ||
		month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	i := 19
	var frac int64
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for ; i < len(b) && isDigit(b[i]); i++ {
			if i-start >= 7 {
				return 0, false // finer than 100 ns
			}
			frac = frac*10 + int64(b[i]-'0')
		}
		nd := i - start
		if nd == 0 {
			return 0, false
		}
		for ; nd < 7; nd++ {
			frac *= 10
		}
	}
	var offset int64 // seconds east of UTC
	if i < len(b) {
		switch b[i] {
		case 'Z':
			i++
		case '+', '-':
			if len(b)-i != 6 || b[i+3] != ':' {
				return 0, false
			}
			oh, ok1 := fixedDigits(b[i+1 : i+3])
			om, ok2 := fixedDigits(b[i+4 : i+6])
			if !ok1 || !ok2 || oh > 23 || om > 59 {
				return 0, false
			}
			offset = int64(oh*3600 + om*60)
			if b[i] == '-' {
				offset = -offset
			}
			i += 6
		}
	}
	if i != len(b) {
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec) - offset
	return secs*ticksPerSecond + frac, true
}

func fixedDigits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400 // y >= 0 here: four-digit years only
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// ticksToTime converts 100 ns ticks since the epoch to a UTC time.
func ticksToTime(t int64) time.Time {
	return time.Unix(t/ticksPerSecond, (t%ticksPerSecond)*100).UTC()
}

// quote renders a field for an error message: quoted, and cut to a readable
// length.
func quote(b []byte) string {
	const max = 80
	if len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return strconv.Quote(string(b[:cut])) + "…"
	}
	return strconv.Quote(string(b))
}
