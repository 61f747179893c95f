//! A wallet address as the tracker keys its registry and book: a lowercase
//! `0x` + 40 hex address (every address the exchange gives) as its 20
//! bytes, inline, and any other text boxed as it came, so that the same
//! text always comes back. 24 bytes and no heap, where a `String` key took
//! 24 and 48 on the heap, once per map: an own node keys a million
//! wallets.

use std::cmp::Ordering;
use std::fmt;

/// A wallet's address (see the module's documentation).
///
/// Each text has one form (a lowercase 40-hex address is always `Hex`), so
/// two addresses are equal exactly when their texts are; and addresses
/// order as their texts do (a version's changes list wallets in address
/// order).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// A lowercase `0x` + 40 hex address, as its bytes.
    Hex([u8; 20]),
    /// Any other text, as it is.
    Text(Box<str>),
}

impl Address {
    /// The address whose text is `text`.
    pub fn of(text: &str) -> Address {
        match hex_bytes(text) {
            Some(bytes) => Address::Hex(bytes),
            None => Address::Text(text.into()),
        }
    }

    /// `f` of its text, made on the stack for a hex address.
    fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match self {
            Address::Hex(bytes) => {
                const DIGITS: &[u8; 16] = b"0123456789abcdef";
                let mut text = [b'0'; 42];
                text[1] = b'x';
                for (pair, b) in text[2..].chunks_exact_mut(2).zip(bytes) {
                    pair[0] = DIGITS[usize::from(b >> 4)];
                    pair[1] = DIGITS[usize::from(b & 15)];
                }
                f(std::str::from_utf8(&text).expect("hex digits are ASCII"))
            }
            Address::Text(text) => f(text),
        }
    }

    /// Whether its text is `text`, without making its text.
    pub fn is(&self, text: &str) -> bool {
        match self {
            Address::Hex(bytes) => hex_bytes(text).is_some_and(|b| &b == bytes),
            Address::Text(own) => &**own == text,
        }
    }
}

/// The 20 bytes of a lowercase `0x` + 40 hex address.
fn hex_bytes(text: &str) -> Option<[u8; 20]> {
    let digits = text.strip_prefix("0x")?.as_bytes();
    if digits.len() != 40 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut bytes = [0; 20];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(bytes)
}

impl Ord for Address {
    fn cmp(&self, other: &Address) -> Ordering {
        match (self, other) {
            // Same length and prefix: the bytes order as the digits do.
            (Address::Hex(a), Address::Hex(b)) => a.cmp(b),
            _ => self.with_text(|a| other.with_text(|b| a.cmp(b))),
        }
    }
}

impl PartialOrd for Address {
    fn partial_cmp(&self, other: &Address) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_text(|text| f.write_str(text))
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_text(|text| write!(f, "{text:?}"))
    }
}

impl From<&str> for Address {
    fn from(text: &str) -> Address {
        Address::of(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Address>(), 24);
    }

    #[test]
    fn only_lowercase_hex_addresses_are_packed() {
        let hex = "0x0123456789abcdef0123456789abcdef01234567";
        assert!(matches!(Address::of(hex), Address::Hex(_)));
        for other in [
            "0x0123456789ABCDEF0123456789abcdef01234567",
            "0x0123456789abcdef0123456789abcdef0123456",
            "0x0123456789abcdef0123456789abcdef012345678",
            "0x0123456789abcdef0123456789abcdef0123456g",
            "1x0123456789abcdef0123456789abcdef01234567",
            "0xabc",
            "",
        ] {
            assert!(matches!(Address::of(other), Address::Text(_)), "{other}");
        }
        // Across the two forms, the order is the texts'.
        let longer = format!("{hex}0");
        let (h, l, short) = (Address::of(hex), Address::of(&longer), Address::of("0xabc"));
        assert!(h < l && l < short && h < short);
        let mut sorted = vec![short.clone(), l.clone(), h.clone()];
        sorted.sort();
        assert_eq!(sorted, [h, l, short]);
    }

    proptest::proptest! {
        /// Whatever the text, it comes back; equality and order are the
        /// texts'.
        #[test]
        fn an_address_is_its_text(
            a in "(0x[0-9a-f]{40})|(0x[0-9a-fA-F]{38,41})|(.{0,44})",
            b in "(0x[0-9a-f]{40})|(0x[0-9a-fA-F]{38,41})|(.{0,44})",
        ) {
            let (x, y) = (Address::of(&a), Address::of(&b));
            proptest::prop_assert_eq!(x.to_string(), a.clone());
            proptest::prop_assert!(x.is(&a));
            proptest::prop_assert_eq!(x == y, a == b);
            proptest::prop_assert_eq!(x.is(&b), a == b);
            proptest::prop_assert_eq!(x.cmp(&y), a.cmp(&b));
        }
    }
}
