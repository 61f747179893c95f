//! The indexes and orderings of the materialization: a fast map for the
//! string-keyed lookups, the stable order of string keys, 32-bit indices,
//! and the in-place permutation that moves items into an order.

use std::collections::HashMap;

use super::WalletInput;

/// Map for the string-keyed lookups of [`materialize`]: the keys are the
/// scan's own symbols and addresses, so SipHash's resistance to chosen keys
/// buys nothing there and foldhash is several times faster.
///
/// [`materialize`]: fn@super::materialize
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Reorders `items` in place so that position `k` holds the item that was at
/// `order[k]`; `order` is left as the identity. No second buffer of (large)
/// items is allocated: fresh memory costs more in page faults than the moves.
///
/// Each cycle of the permutation is rotated: its first item is held aside,
/// every other item is moved once into its slot, and the held item goes
/// last. Swapping along the cycle instead moves every byte about twice as
/// often, and these moves were nearly half of [`materialize`].
///
/// # Panics
///
/// When `order` is not a permutation of the indices of `items` (checked
/// before anything moves).
///
/// [`materialize`]: fn@super::materialize
#[allow(unsafe_code)] // SAFETY below
pub(super) fn permute_in_place<T>(items: &mut [T], order: &mut [u32]) {
    assert_eq!(items.len(), order.len(), "one index per item");
    let mut seen = vec![false; order.len()];
    for &i in order.iter() {
        let slot = seen.get_mut(i as usize);
        assert!(
            slot.as_deref() == Some(&false),
            "order is not a permutation"
        );
        *slot.expect("checked above") = true;
    }
    drop(seen);
    let base = items.as_mut_ptr();
    for start in 0..order.len() {
        if order[start] as usize == start {
            continue;
        }
        // SAFETY: `order` is a permutation of `0..items.len()` (checked
        // above), so every index below is in bounds and the cycle through
        // `start` visits each of its slots once. The item at `start` is read
        // out, each later item of the cycle is copied into the slot vacated
        // before it, and the held item is written into the last vacated
        // slot: every item ends up in exactly one slot, none is dropped or
        // duplicated. Nothing in the loop can panic (no allocation, no
        // user code), so no slot is observed vacated.
        unsafe {
            let held = std::ptr::read(base.add(start));
            let mut k = start;
            loop {
                let from = order[k] as usize;
                order[k] = k as u32;
                if from == start {
                    std::ptr::write(base.add(k), held);
                    break;
                }
                std::ptr::copy_nonoverlapping(base.add(from), base.add(k), 1);
                k = from;
            }
        }
    }
}

/// The first 16 bytes of `s`, big-endian, zero-padded: ordering these orders
/// the strings, except that equal prefixes need the full comparison.
fn prefix_key(s: &str) -> u128 {
    let mut word = [0u8; 16];
    let n = s.len().min(16);
    word[..n].copy_from_slice(&s.as_bytes()[..n]);
    u128::from_be_bytes(word)
}

/// The indices of `items` in the stable order of their string keys.
pub(super) fn sorted_order<T>(items: &[T], key: impl Fn(&T) -> &str) -> Vec<u32> {
    let mut keyed: Vec<(u128, u32)> = items
        .iter()
        .enumerate()
        .map(|(i, t)| (prefix_key(key(t)), index_u32(i)))
        .collect();
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| key(&items[a.1 as usize]).cmp(key(&items[b.1 as usize])))
            .then(a.1.cmp(&b.1))
    });
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// `i` as a `u32`: the aggregation indexes markets, wallets and positions with
/// 32 bits (four billion positions would need terabytes first).
pub(super) fn index_u32(i: usize) -> u32 {
    u32::try_from(i).expect("fewer than 2^32 markets, wallets and positions")
}

/// Address → input index of every wallet.
pub(super) fn address_index(wallets: &[WalletInput]) -> FastMap<&str, u32> {
    wallets
        .iter()
        .enumerate()
        .map(|(i, w)| (w.address.as_str(), index_u32(i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::test_support::Lcg;

    #[test]
    fn permutes_in_place() {
        let mut rng = Lcg(7);
        for n in [0usize, 1, 2, 3, 10, 257] {
            let mut order: Vec<u32> = (0..n as u32).collect();
            rng.shuffle(&mut order);
            let items: Vec<String> = (0..n).map(|i| format!("item {i}")).collect();
            let expected: Vec<String> = order.iter().map(|&i| items[i as usize].clone()).collect();
            let mut permuted = items.clone();
            let mut scratch = order.clone();
            permute_in_place(&mut permuted, &mut scratch);
            assert_eq!(permuted, expected, "n = {n}");
            assert!(scratch.iter().enumerate().all(|(k, &i)| i as usize == k));
        }
    }

    #[test]
    #[should_panic(expected = "not a permutation")]
    fn permute_rejects_a_non_permutation() {
        let mut items = vec!['a', 'b', 'c'];
        permute_in_place(&mut items, &mut [1, 1, 0]);
    }

    #[test]
    fn sorted_order_is_the_stable_string_order() {
        let keys = [
            "0xffff",
            "0x00",
            "",
            "0x0000000000000000000000000000000000000001",
            "0x0000000000000000000000000000000000000000",
            "0x00",
            "0x0000000000000000",
            "0x000000000000000",
            "é",
            "0x00000000000000000",
            "Z",
            "0x00\u{0}",
        ];
        let order = sorted_order(&keys, |k| k);
        let mut expected: Vec<u32> = (0..keys.len() as u32).collect();
        expected.sort_by_key(|&i| keys[i as usize]); // stable
        assert_eq!(order, expected);
        assert!(prefix_key("0x00") < prefix_key("0x01"));
        assert_eq!(
            prefix_key("0x00"),
            prefix_key("0x00\u{0}"),
            "ties need the full comparison"
        );
    }
}
