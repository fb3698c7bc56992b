//! A number of bytes as people write it: `256M`, `2G`, `1.5GiB`, `4096`.
//!
//! The one size type of the workspace: memory budgets, stack sizes, buffer allowances, chunk
//! sizes and message sizes all parse and print through it.
//!
//! # Syntax
//! A decimal number (digits, optionally a fraction `.digits`), optional spaces, and an optional
//! unit: `K`, `M`, `G`, `T` or `P`, binary (`1K` = 1024 bytes), in either case, optionally
//! followed by `iB` or `B` (`64KiB`, `64kb`, `64k` are the same); `B` alone means bytes. A
//! fraction is rounded down to whole bytes (`1.5K` = 1536). Negative numbers, sizes beyond
//! `u64::MAX` bytes and anything else are refused.
//!
//! [`Display`](std::fmt::Display) writes the largest unit that divides the size exactly (`64K`,
//! `3G`, `1000`), which parses back to the same size.

use std::fmt;
use std::str::FromStr;

/// A number of bytes as people write it: a decimal number (a fraction allowed, rounded down to
/// whole bytes) and an optional binary unit `K`, `M`, `G`, `T` or `P`, in either case, with
/// `iB` or `B` or nothing after it (`64KiB`, `64kb`, `64k`; `B` alone means bytes). Negative
/// numbers and sizes beyond `u64::MAX` bytes are refused. Displayed in the largest unit that
/// divides it exactly (`64K`, `3G`, `1000`), which parses back to the same size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

/// Units from the largest, with their shift.
const UNITS: [(char, u32); 5] = [('P', 50), ('T', 40), ('G', 30), ('M', 20), ('K', 10)];

impl ByteSize {
    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// The size as a `usize`, if it fits.
    pub fn to_usize(self) -> Option<usize> {
        usize::try_from(self.0).ok()
    }

    /// The size rounded for people, in binary units with one decimal (`1.5 GiB`, `512 B`).
    pub fn human(self) -> String {
        for (unit, shift) in UNITS {
            if self.0 >= 1 << shift {
                return format!("{:.1} {unit}iB", self.0 as f64 / (1u64 << shift) as f64);
            }
        }
        format!("{} B", self.0)
    }
}

impl From<u64> for ByteSize {
    fn from(bytes: u64) -> ByteSize {
        ByteSize(bytes)
    }
}

impl From<ByteSize> for u64 {
    fn from(size: ByteSize) -> u64 {
        size.0
    }
}

/// Why a text is not a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseSizeError {
    text: String,
    reason: &'static str,
}

impl fmt::Display for ParseSizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' is not a size: {} (expected e.g. 4096, 64K, 256M, 1.5G)",
            self.text, self.reason
        )
    }
}

impl std::error::Error for ParseSizeError {}

impl FromStr for ByteSize {
    type Err = ParseSizeError;

    fn from_str(text: &str) -> Result<ByteSize, ParseSizeError> {
        let bad = |reason| ParseSizeError {
            text: text.to_string(),
            reason,
        };
        let t = text.trim();
        let digits_end = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(digits_end);
        if number.is_empty() {
            return Err(bad(if t.starts_with('-') {
                "sizes are not negative"
            } else {
                "no number"
            }));
        }
        let unit = unit.trim_start();
        let mut chars = unit.chars();
        let shift = match chars.next().map(|c| c.to_ascii_uppercase()) {
            None => 0,
            Some('B') if chars.as_str().is_empty() => 0,
            Some(c) => match UNITS.iter().find(|(u, _)| *u == c) {
                Some(&(_, shift)) => {
                    let rest = chars.as_str();
                    if !["", "b", "B", "ib", "iB", "IB", "Ib"].contains(&rest) {
                        return Err(bad("unknown unit"));
                    }
                    shift
                }
                None => return Err(bad("unknown unit")),
            },
        };
        let (whole, fraction) = match number.split_once('.') {
            Some((w, f)) => (w, f),
            None => (number, ""),
        };
        if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
            return Err(bad("not a number"));
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad("too large"))?
        };
        let mut bytes = whole
            .checked_mul(1 << shift)
            .ok_or_else(|| bad("too large"))?;
        // The fraction, exactly: digits / 10^len of a unit, rounded down.
        if !fraction.is_empty() {
            let digits = fraction.trim_end_matches('0');
            if digits.len() > 18 {
                return Err(bad("too many decimals"));
            }
            if !digits.is_empty() {
                let num: u128 = digits.parse().map_err(|_| bad("not a number"))?;
                let part = (num << shift) / 10u128.pow(digits.len() as u32);
                bytes = u64::try_from(part)
                    .ok()
                    .and_then(|p| bytes.checked_add(p))
                    .ok_or_else(|| bad("too large"))?;
            }
        }
        Ok(ByteSize(bytes))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, shift) in UNITS {
            if self.0 >= 1 << shift && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{}{unit}", self.0 >> shift);
            }
        }
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn size(text: &str) -> Result<u64, ParseSizeError> {
        text.parse::<ByteSize>().map(ByteSize::bytes)
    }

    #[test]
    fn units_suffixes_and_fractions() {
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("64K"), Ok(64 << 10));
        assert_eq!(size("64k"), Ok(64 << 10));
        assert_eq!(size("64KiB"), Ok(64 << 10));
        assert_eq!(size("64kb"), Ok(64 << 10));
        assert_eq!(size(" 256 M "), Ok(256 << 20));
        assert_eq!(size("2G"), Ok(2 << 30));
        assert_eq!(size("1T"), Ok(1 << 40));
        assert_eq!(size("1.5K"), Ok(1536));
        assert_eq!(size("0.5M"), Ok(512 << 10));
        assert_eq!(size(".25K"), Ok(256));
        assert_eq!(size("10B"), Ok(10));
        assert_eq!(size("0"), Ok(0));
        assert_eq!(size("16383P"), Ok(16383 << 50));
    }

    #[test]
    fn refuses_what_is_not_a_size() {
        for text in [
            "",
            " ",
            "lots",
            "-1",
            "-1K",
            "1X",
            "1KK",
            "1 K B",
            "1.2.3",
            ".",
            "K",
            "1e3",
            "NaN",
            "inf",
            "16384P",
            "18446744073709551616",
            "1Kx",
            "1Mi B",
        ] {
            assert!(size(text).is_err(), "{text:?} was accepted");
        }
        let message = size("lots").unwrap_err().to_string();
        assert!(
            message.contains("'lots'") && message.contains("256M"),
            "{message}"
        );
    }

    #[test]
    fn display_uses_the_largest_exact_unit() {
        assert_eq!(ByteSize(65536).to_string(), "64K");
        assert_eq!(ByteSize(1000).to_string(), "1000");
        assert_eq!(ByteSize(3 << 30).to_string(), "3G");
        assert_eq!(ByteSize(1536).to_string(), "1536");
        assert_eq!(ByteSize(0).to_string(), "0");
        assert_eq!(ByteSize(3 << 29).human(), "1.5 GiB");
        assert_eq!(ByteSize(100).human(), "100 B");
    }

    proptest! {
        #[test]
        fn display_parses_back(bytes in any::<u64>()) {
            let text = ByteSize(bytes).to_string();
            prop_assert_eq!(size(&text), Ok(bytes));
        }

        #[test]
        fn units_multiply(n in 0u64..1 << 13, unit in 0usize..5) {
            let (letter, shift) = UNITS[unit];
            prop_assert_eq!(size(&format!("{n}{letter}")), Ok(n << shift));
            prop_assert_eq!(size(&format!("{n}{}iB", letter.to_ascii_lowercase())), Ok(n << shift));
        }

        #[test]
        fn never_panics(text in "\\PC{0,24}") {
            let _ = size(&text);
        }

        #[test]
        fn number_like_text_never_panics(text in "[0-9. ]{0,30}[kKmMgGtTpPbBi]{0,4}") {
            if let Ok(b) = size(&text) {
                // Whatever it accepted prints as a size it accepts again.
                prop_assert_eq!(size(&ByteSize(b).to_string()), Ok(b));
            }
        }
    }
}
