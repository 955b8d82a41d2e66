//! Number parsing and formatting with the exact rules Redis uses.
//!
//! Redis parses integers with its strict `string2ll` (no spaces, no `+`, no
//! leading zeros), doubles with `strtod` plus its own rejections, and long
//! doubles (INCRBYFLOAT, HINCRBYFLOAT) with `strtold`. It prints doubles with
//! `%.17g` and long doubles with `%.17Lf` trimmed of trailing zeros. C's
//! printf has no Rust equivalent, so the `%g` rules are written out here once,
//! on top of Rust's exactly rounded `{:e}` / `{:.N}` formatting.

use num_bigint::BigUint;
use rustc_apfloat::ieee::X87DoubleExtended;
use rustc_apfloat::{Float, FloatConvert, Round};

/// C's `atoi`, which Redis uses where it takes any text as a number
/// (DEBUG's switches, MIGRATE's port, a key count, the Lua debugger's
/// arguments): leading blanks, a sign, then digits up to the first other
/// byte (or NUL); 0 when there are none. As glibc's, it is `strtol`
/// (saturating at the i64 range) cut to an `int`.
pub fn atoi(text: &[u8]) -> i32 {
    let text = crate::error::c_str(text, usize::MAX);
    let mut i = text
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .count();
    let negative = text.get(i) == Some(&b'-');
    if matches!(text.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut n: i64 = 0;
    for &c in text[i..].iter().take_while(|c| c.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    (if negative { n.saturating_neg() } else { n }) as i32
}

/// Redis's `string2ll`: the whole input must be a canonical signed integer.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Parses an unsigned decimal the way `string2ull` does (used for SCAN cursors).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// What `strtod` would consume as a whole: decimal, hex or infinity syntax.
fn float_syntax(s: &[u8]) -> Option<FloatSyntax> {
    let body = match s.first()? {
        b'+' | b'-' => &s[1..],
        _ => s,
    };
    let lower = body.to_ascii_lowercase();
    if lower == b"inf" || lower == b"infinity" {
        return Some(FloatSyntax::Infinity);
    }
    if lower.starts_with(b"0x") {
        let rest = &lower[2..];
        let (mant, exp) = match rest.iter().position(|&c| c == b'p') {
            Some(p) => (&rest[..p], Some(&rest[p + 1..])),
            None => (rest, None),
        };
        if !mantissa_ok(mant, |c| c.is_ascii_hexdigit()) || !exponent_ok(exp) {
            return None;
        }
        return Some(FloatSyntax::Hex);
    }
    let (mant, exp) = match lower.iter().position(|&c| c == b'e') {
        Some(p) => (&lower[..p], Some(&lower[p + 1..])),
        None => (&lower[..], None),
    };
    if !mantissa_ok(mant, |c| c.is_ascii_digit()) || !exponent_ok(exp) {
        return None;
    }
    let nonzero = mant.iter().any(|&c| (b'1'..=b'9').contains(&c));
    Some(FloatSyntax::Decimal { nonzero })
}

enum FloatSyntax {
    Infinity,
    Hex,
    Decimal { nonzero: bool },
}

fn mantissa_ok(m: &[u8], digit: impl Fn(u8) -> bool) -> bool {
    let mut digits = 0;
    let mut dots = 0;
    for &c in m {
        if c == b'.' {
            dots += 1;
        } else if digit(c) {
            digits += 1;
        } else {
            return false;
        }
    }
    digits > 0 && dots <= 1
}

fn exponent_ok(e: Option<&[u8]>) -> bool {
    match e {
        None => true,
        Some(e) => {
            let d = match e.first() {
                Some(b'+' | b'-') => &e[1..],
                _ => e,
            };
            !d.is_empty() && d.iter().all(u8::is_ascii_digit)
        }
    }
}

/// Redis's `getDoubleFromObject`: strtod over the whole string, rejecting
/// leading space, NaN, and overflow or underflow to zero.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let syntax = float_syntax(s)?;
    let text = std::str::from_utf8(s).ok()?;
    let v = match syntax {
        FloatSyntax::Infinity => {
            if s[0] == b'-' {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        FloatSyntax::Hex => {
            let ld = X87DoubleExtended::from_str_r(&hex_for_apfloat(text), Round::NearestTiesToEven)
                .ok()?
                .value;
            let v: rustc_apfloat::ieee::Double = ld.convert(&mut false).value;
            f64::from_bits(v.to_bits() as u64)
        }
        FloatSyntax::Decimal { nonzero } => {
            let v: f64 = text.parse().ok()?;
            if v.is_infinite() || (v == 0.0 && nonzero) {
                return None;
            }
            v
        }
    };
    if v.is_nan() { None } else { Some(v) }
}

/// strtod's hex floats (`0x10`, `0X1.8P3`) in the spelling the apfloat
/// parser takes: lowercase, with an explicit binary exponent.
fn hex_for_apfloat(text: &str) -> String {
    let mut t = text.to_ascii_lowercase();
    if !t.contains('p') {
        t.push_str("p0");
    }
    t
}

/// C's `%.{prec}g`.
pub fn fmt_g(d: f64, prec: usize) -> String {
    // Integral values that fit in `prec` digits print as plain integers;
    // this is the common case (counts, TTLs) and avoids exact formatting.
    if d.fract() == 0.0 && d.abs() < 1e15 && !(d == 0.0 && d.is_sign_negative()) && prec >= 15 {
        let mut buf = itoa::Buffer::new();
        return buf.format(d as i64).to_string();
    }
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let prec = prec.max(1);
    let sci = format!("{:.*e}", prec - 1, d);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        let mant = trim_fraction(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A double as Redis's `addReplyDouble` writes it in RESP2 (a bulk string).
/// C's `%.17g`, infinities and negative zero included, as Redis spells a
/// score in a digest or a rewritten ZADD.
pub fn printf_g17(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 && d.is_sign_negative() {
        return "-0".into();
    }
    fmt_g(d, 17)
}

pub fn reply_double(d: f64) -> String {
    fmt_g(d, 17)
}

/// A double as Redis 7.0 writes it in RESP3 (`,` line).
pub fn resp3_double(d: f64) -> String {
    fmt_g(d, 17)
}

/// The long double (x87 80-bit) arithmetic behind INCRBYFLOAT and
/// HINCRBYFLOAT, so that results print exactly as Redis prints them.
#[derive(Clone, Copy, Debug)]
pub struct LongDouble(X87DoubleExtended);

impl LongDouble {
    /// `strtold` with Redis's `string2ld` rejections.
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= 5 * 1024 {
            return None;
        }
        let syntax = float_syntax(s)?;
        let text = std::str::from_utf8(s).ok()?;
        let v = match syntax {
            FloatSyntax::Infinity => {
                let inf = X87DoubleExtended::INFINITY;
                if s[0] == b'-' { -inf } else { inf }
            }
            FloatSyntax::Hex | FloatSyntax::Decimal { .. } => {
                let text = if matches!(syntax, FloatSyntax::Hex) {
                    hex_for_apfloat(text)
                } else {
                    text.to_string()
                };
                let parsed = X87DoubleExtended::from_str_r(&text, Round::NearestTiesToEven).ok()?;
                let v = parsed.value;
                let nonzero = matches!(syntax, FloatSyntax::Decimal { nonzero: true });
                if v.is_infinite() || (v.is_zero() && nonzero) {
                    return None;
                }
                v
            }
        };
        if v.is_nan() { None } else { Some(LongDouble(v)) }
    }

    #[allow(clippy::should_implement_trait)] // read as Redis's `value + incr` in the handlers
    pub fn add(self, other: LongDouble) -> LongDouble {
        LongDouble((self.0 + other.0).value)
    }

    pub fn is_finite(self) -> bool {
        self.0.is_finite()
    }

    /// `(long long) ceill(self * 1000.0)` (Redis's timeouts in seconds):
    /// None where the cast has no value in C (not finite, or past what a
    /// `long long` holds; x86 then yields LLONG_MIN).
    pub fn millis_ceil(self) -> Option<i64> {
        let thousand = X87DoubleExtended::from_u128(1000).value;
        let ms = (self.0 * thousand).value.round_to_integral(Round::TowardPositive).value;
        if !ms.is_finite() {
            return None;
        }
        let mut exact = false;
        let converted = ms.to_i128_r(64, Round::TowardZero, &mut exact);
        if converted.status != rustc_apfloat::Status::OK {
            return None;
        }
        i64::try_from(converted.value).ok()
    }

    /// Redis's `ld2string(…, LD_STR_HUMAN)`: `%.17Lf`, trailing zeros removed.
    pub fn to_human(self) -> String {
        let v = self.0;
        if v.is_infinite() {
            return if v.is_negative() { "-inf".into() } else { "inf".into() };
        }
        let bits = v.to_bits();
        let negative = (bits >> 79) & 1 == 1;
        let biased = ((bits >> 64) & 0x7fff) as i64;
        let mantissa = bits as u64;
        // value = mantissa * 2^(exp) with the explicit integer bit included.
        let exp = if biased == 0 { 1 - 16383 - 63 } else { biased - 16383 - 63 };
        fixed17_trimmed(negative, mantissa, exp)
    }
}

/// A double as Redis's `addReplyHumanLongDouble` prints it (GEOPOS,
/// WITHCOORD): converted to a long double, exactly, then `%.17Lf` with
/// trailing zeros removed.
pub fn human_double(d: f64) -> String {
    if d.is_infinite() {
        return if d < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    let bits = d.to_bits();
    let negative = bits >> 63 == 1;
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let fraction = bits & ((1 << 52) - 1);
    let (mantissa, exp) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    fixed17_trimmed(negative, mantissa, exp)
}

/// `mantissa * 2^exp` printed as `%.17f` (exactly rounded, ties to even)
/// with trailing zeros and a bare point removed; no sign for zero.
fn fixed17_trimmed(negative: bool, mantissa: u64, exp: i64) -> String {
    const FRAC: u32 = 17;
    let scale = BigUint::from(10u32).pow(FRAC);
    let m = BigUint::from(mantissa);
    let scaled = if exp >= 0 {
        (m << exp as usize) * &scale
    } else {
        let shift = (-exp) as usize;
        let n = m * &scale;
        let q: BigUint = &n >> shift;
        let rem = &n - (&q << shift);
        let half = BigUint::from(1u32) << (shift - 1);
        let q_odd = q.bit(0);
        if rem > half || (rem == half && q_odd) { q + 1u32 } else { q }
    };
    let digits = scaled.to_string();
    let digits = format!("{:0>width$}", digits, width = FRAC as usize + 1);
    let (int_part, frac_part) = digits.split_at(digits.len() - FRAC as usize);
    let frac_part = frac_part.trim_end_matches('0');
    let mut out = String::new();
    let is_zero = int_part.bytes().all(|c| c == b'0') && frac_part.is_empty();
    if negative && !is_zero {
        out.push('-');
    }
    out.push_str(int_part);
    if !frac_part.is_empty() {
        out.push('.');
        out.push_str(frac_part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_strictly() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        for bad in [&b"-0"[..], b"01", b"+1", b" 1", b"1 ", b"", b"-"] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn g17_matches_printf() {
        assert_eq!(fmt_g(0.1, 17), "0.10000000000000001");
        assert_eq!(fmt_g(1.5, 17), "1.5");
        assert_eq!(fmt_g(1e20, 17), "1e+20");
        assert_eq!(fmt_g(123456789012345678.0, 17), "1.2345678901234568e+17");
        assert_eq!(fmt_g(0.0001, 17), "0.0001");
        assert_eq!(fmt_g(0.00001, 17), "1.0000000000000001e-05");
        assert_eq!(fmt_g(9.007199254740992e15, 14), "9.007199254741e+15");
        assert_eq!(fmt_g(3.0, 14), "3");
    }

    #[test]
    fn floats_follow_strtod_with_redis_rejections() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"0X1P4"), Some(16.0));
        assert_eq!(parse_f64(b"-0x1.8p1"), Some(-3.0));
        assert_eq!(LongDouble::parse(b"0x10").map(|v| v.to_human()), Some("16".to_string()));
        for bad in [&b"nan"[..], b" 1", b"1e", b"1e999", b"1e-999", b"abc", b""] {
            assert_eq!(parse_f64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn long_double_human_format() {
        let a = LongDouble::parse(b"10.50").unwrap();
        let b = LongDouble::parse(b"0.1").unwrap();
        assert_eq!(a.add(b).to_human(), "10.6");
        assert_eq!(
            LongDouble::parse(b"5.0e3")
                .unwrap()
                .add(LongDouble::parse(b"2.0e2").unwrap())
                .to_human(),
            "5200"
        );
        assert_eq!(LongDouble::parse(b"0.1").unwrap().to_human(), "0.1");
        assert_eq!(LongDouble::parse(b"-0.0").unwrap().to_human(), "0");
    }
}
