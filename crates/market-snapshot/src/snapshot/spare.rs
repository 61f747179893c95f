//! The sorted lists of the last version dropped, kept for the next apply.
//!
//! Each apply writes every listing order and each changed market's
//! positions into new lists: tens of megabytes at 300,000 wallets. A
//! server applies a publish a minute, and by then the allocator has handed
//! the pages of the previous lists back to the system (the binary's
//! jemalloc a second after they are freed; glibc maps lists this large on
//! their own and unmaps them at once), so every apply faulted in and zeroed
//! its lists' memory afresh (a third of the merge's samples in a profile
//! of the bench, more in a server). A version's lists
//! are taken here when it is dropped and written over by the next apply.
//! Between two publishes a server holds one version's lists more.

use std::sync::Mutex;

use super::markets::PositionRef;

/// Lists shorter than this are left to the allocator: the small markets'
/// lists are a few kilobytes, and their pages are shared with other
/// allocations. The unit tests keep every list, so that their small
/// versions are applied over kept lists too.
#[cfg(not(test))]
const SHORTEST: usize = 4096;
#[cfg(test)]
const SHORTEST: usize = 1;

/// The lists of one dropped version, by element type.
#[derive(Debug, Default)]
pub(super) struct Lists {
    slots: Vec<Vec<u32>>,
    codes: Vec<Vec<u64>>,
    refs: Vec<Vec<PositionRef>>,
}

/// A list's element type, and where its lists are kept.
pub(super) trait Element: Copy {
    fn kept(lists: &mut Lists) -> &mut Vec<Vec<Self>>;
}

impl Element for u32 {
    fn kept(lists: &mut Lists) -> &mut Vec<Vec<u32>> {
        &mut lists.slots
    }
}

impl Element for u64 {
    fn kept(lists: &mut Lists) -> &mut Vec<Vec<u64>> {
        &mut lists.codes
    }
}

impl Element for PositionRef {
    fn kept(lists: &mut Lists) -> &mut Vec<Vec<PositionRef>> {
        &mut lists.refs
    }
}

impl Lists {
    /// Keeps `list` (emptied) if it is long enough to be worth it.
    pub(super) fn keep<T: Element>(&mut self, mut list: Vec<T>) {
        if list.capacity() >= SHORTEST {
            list.clear();
            T::kept(self).push(list);
        }
    }
}

/// The lists kept from the last version dropped, shared by the versions
/// applied one from another (a build starts with none).
#[derive(Debug, Default)]
pub(super) struct Spare(Mutex<Lists>);

impl Spare {
    /// An empty list with room for `len` entries: the smallest kept one
    /// that has it, unless it is more than an eighth larger, or a new one
    /// with a little more (so that a list that grows a little by the next
    /// version still fits). Without the bound, a small market's list took
    /// a listing order's (300,000 entries), and the orders then took new
    /// ones: a server held 220 MB more, not one version's lists.
    pub(super) fn take<T: Element>(&self, len: usize) -> Vec<T> {
        let fresh = || Vec::with_capacity(len + len / 64);
        if len < SHORTEST {
            return fresh();
        }
        let mut lists = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let kept = T::kept(&mut lists);
        let best = (0..kept.len())
            .filter(|&i| kept[i].capacity() >= len)
            .min_by_key(|&i| kept[i].capacity());
        match best {
            Some(i) if kept[i].capacity() <= len + len / 8 => kept.swap_remove(i),
            _ => fresh(),
        }
    }

    /// Replaces what is kept by the lists of a version being dropped: one
    /// version's lists at most, whatever the number of versions dropped
    /// between two applies.
    pub(super) fn replace(&self, lists: Lists) {
        // The lists replaced are freed after the lock is let go.
        let _previous = std::mem::replace(
            &mut *self.0.lock().unwrap_or_else(|p| p.into_inner()),
            lists,
        );
    }

    /// The bytes of the lists kept (for the memory report).
    pub(super) fn heap_bytes(&self) -> usize {
        fn bytes<T>(lists: &[Vec<T>]) -> usize {
            lists
                .iter()
                .map(|l| l.capacity() * std::mem::size_of::<T>())
                .sum()
        }
        let lists = self.0.lock().unwrap_or_else(|p| p.into_inner());
        bytes(&lists.slots) + bytes(&lists.codes) + bytes(&lists.refs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_smallest_kept_list_that_fits_within_an_eighth() {
        let spare = Spare::default();
        let mut lists = Lists::default();
        for capacity in [10_000, 5_000, 20_000] {
            let mut l: Vec<u64> = Vec::with_capacity(capacity);
            l.push(7);
            lists.keep(l);
        }
        lists.keep(Vec::<u64>::new());
        spare.replace(lists);
        // The one below `SHORTEST` was left to the allocator.
        assert_eq!(spare.heap_bytes(), 8 * (10_000 + 5_000 + 20_000));
        let l: Vec<u64> = spare.take(9_000);
        assert!(l.is_empty());
        assert_eq!(l.capacity(), 10_000);
        // The smallest that fits (20,000) is too large for 6,000: a new one.
        let l: Vec<u64> = spare.take(6_000);
        assert_eq!(l.capacity(), 6_000 + 6_000 / 64);
        // None fits: a new one with room to grow.
        let l: Vec<u64> = spare.take(30_000);
        assert_eq!(l.capacity(), 30_000 + 30_000 / 64);
        // Other element types are kept apart.
        let l: Vec<u32> = spare.take(1_000);
        assert_eq!(l.capacity(), 1_000 + 1_000 / 64);
        // What is left: 5,000 and 20,000; a newer version's lists replace it.
        assert_eq!(spare.heap_bytes(), 8 * (5_000 + 20_000));
        spare.replace(Lists::default());
        assert_eq!(spare.heap_bytes(), 0);
    }
}
