//! "Did you mean": the closest known name to a misspelt one, found without
//! comparing the word against every candidate.
//!
//! A plan generator that gets one id wrong tends to get it wrong
//! everywhere: 10,000 tasks each naming a near-miss dependency made the old
//! search (an edit distance against every task id, per unknown id) take
//! 84 s. Here the candidates are indexed once, in a trie, and each word
//! walks the trie carrying one row of the Levenshtein table per node
//! (the row of the word against the node's prefix). A subtree is left as
//! soon as every entry of its row exceeds the best distance still
//! acceptable, since extending a prefix never lowers it; for realistic ids
//! (`task-0042` against `taks-0042`) a word visits a few hundred nodes,
//! not every candidate. The walk is also capped at [`MAX_CELLS`] table
//! cells per word, so no input can make it quadratic: past the cap the
//! best suggestion found so far is given.
//!
//! The answer is the one the plain search gives (tested against
//! `strsim::levenshtein` over every candidate): a name equal to the word
//! ignoring case first; otherwise the smallest edit distance, counted in
//! characters, of at most a third of the word's length; ties go to the
//! candidate listed first. The word itself, and a name the caller excludes
//! (a task's own id), are never suggested.
//!
//! A pairwise crate (`strsim`) cannot serve the walk itself: pruning needs
//! the table's rows per shared prefix, which its functions do not expose.

use std::collections::HashMap;

use super::quoted;

/// The most Levenshtein table cells one word may compute while searching
/// for a suggestion (about 0.1 ms of work). Real typos finish in a few
/// thousand; the cap only bounds what a hostile or degenerate plan costs.
pub const MAX_CELLS: usize = 100_000;

/// An index of candidate names for [`Suggester::suggest`].
#[derive(Debug, Default)]
pub(crate) struct Suggester<'a> {
    names: Vec<&'a str>,
    /// Lowercase form -> up to three first indices of distinct names with
    /// it (enough to skip the word itself and an excluded name).
    lower: HashMap<String, Vec<u32>>,
    nodes: Vec<Node>,
}

#[derive(Debug, Default)]
struct Node {
    /// Children, sorted by character.
    children: Vec<(char, u32)>,
    /// The first candidate spelled exactly this prefix.
    terminal: Option<u32>,
    /// The smallest candidate index in this subtree.
    min_index: u32,
}

impl<'a> Suggester<'a> {
    /// Indexes `candidates`, in the order that breaks ties.
    pub(crate) fn new(candidates: impl IntoIterator<Item = &'a str>) -> Suggester<'a> {
        let mut s = Suggester {
            names: Vec::new(),
            lower: HashMap::new(),
            nodes: vec![Node {
                min_index: u32::MAX,
                ..Node::default()
            }],
        };
        for name in candidates {
            let Ok(index) = u32::try_from(s.names.len()) else {
                break;
            };
            s.names.push(name);
            s.insert(name, index);
        }
        s
    }

    fn insert(&mut self, name: &str, index: u32) {
        let mut node = 0usize;
        self.nodes[0].min_index = self.nodes[0].min_index.min(index);
        for c in name.chars() {
            let next = match self.nodes[node]
                .children
                .binary_search_by_key(&c, |&(ch, _)| ch)
            {
                Ok(k) => self.nodes[node].children[k].1 as usize,
                Err(k) => {
                    let id = self.nodes.len();
                    self.nodes.push(Node {
                        min_index: index,
                        ..Node::default()
                    });
                    // Node counts are bounded by the plan's size (64 MiB).
                    self.nodes[node].children.insert(k, (c, id as u32));
                    id
                }
            };
            node = next;
            self.nodes[node].min_index = self.nodes[node].min_index.min(index);
        }
        if self.nodes[node].terminal.is_some() {
            return; // A repeated name: the first one wins every tie.
        }
        self.nodes[node].terminal = Some(index);
        let firsts = self.lower.entry(name.to_lowercase()).or_default();
        if firsts.len() < 3 {
            firsts.push(index);
        }
    }

    /// ` (did you mean "x"?)` when a candidate other than `word` and
    /// `exclude` is close to `word` (see the module docs), else empty.
    pub(crate) fn did_you_mean(&self, word: &str, exclude: Option<&str>) -> String {
        match self.suggest(word, exclude) {
            Some(name) => format!(" (did you mean {}?)", quoted(name)),
            None => String::new(),
        }
    }

    /// The closest candidate to `word`, if one is close enough.
    pub(crate) fn suggest(&self, word: &str, exclude: Option<&str>) -> Option<&'a str> {
        self.search(word, exclude).0
    }

    /// [`suggest`](Self::suggest), and the table cells the walk computed
    /// (what its cost is counted in).
    fn search(&self, word: &str, exclude: Option<&str>) -> (Option<&'a str>, usize) {
        let allowed = |name: &str| name != word && Some(name) != exclude;
        if let Some(firsts) = self.lower.get(&word.to_lowercase())
            && let Some(&i) = firsts.iter().find(|&&i| allowed(self.names[i as usize]))
        {
            return (Some(self.names[i as usize]), 0);
        }
        let chars: Vec<char> = word.chars().collect();
        let limit = chars.len() / 3;
        if limit == 0 {
            return (None, 0);
        }
        let m = chars.len();
        // (distance, candidate index) of the best so far.
        let mut best: Option<(usize, u32)> = None;
        let mut cells = 0usize;
        let root: Vec<usize> = (0..=m).collect();
        // (node, its row, its depth).
        let mut stack: Vec<(u32, Vec<usize>, usize)> = vec![(0, root, 0)];
        while let Some((node, row, depth)) = stack.pop() {
            let node = &self.nodes[node as usize];
            let bound = best.map_or(limit, |(d, _)| d);
            let row_min = row.iter().copied().min().unwrap_or(usize::MAX);
            // Extending the prefix never lowers the row's minimum.
            if row_min > bound || best.is_some_and(|(d, i)| row_min == d && node.min_index > i) {
                continue;
            }
            if let Some(t) = node.terminal {
                let d = row[m];
                let better = match best {
                    None => d <= limit,
                    Some((bd, bi)) => d < bd || (d == bd && t < bi),
                };
                if better && allowed(self.names[t as usize]) {
                    best = Some((d, t));
                }
            }
            if cells > MAX_CELLS {
                break;
            }
            // Best first: the child spelling the word's own next character
            // is walked first (pushed last), the others in character
            // order. A near miss (`taks-00041`) then meets its match
            // within a few nodes, and the bound it sets prunes the rest
            // of the trie at once; walked in character order, the walk
            // first wandered through every branch within the limit
            // (`task-0…`), which grows with the plan (19 → 39 → 66 µs
            // per word at 1.5k/6k/24k ids). The answer does not depend
            // on the order (ties go to the smallest index either way).
            let preferred = chars.get(depth).copied();
            let mut expand = |c: char, child: u32, stack: &mut Vec<(u32, Vec<usize>, usize)>| {
                let mut next = Vec::with_capacity(m + 1);
                next.push(row[0] + 1);
                for j in 1..=m {
                    let substitute = row[j - 1] + usize::from(chars[j - 1] != c);
                    next.push(substitute.min(row[j] + 1).min(next[j - 1] + 1));
                }
                cells += m + 1;
                stack.push((child, next, depth + 1));
            };
            for &(c, child) in node.children.iter().rev() {
                if Some(c) != preferred {
                    expand(c, child, &mut stack);
                }
            }
            if let Some(p) = preferred
                && let Ok(k) = node.children.binary_search_by_key(&p, |&(ch, _)| ch)
            {
                let (c, child) = node.children[k];
                expand(c, child, &mut stack);
            }
        }
        (best.map(|(_, i)| self.names[i as usize]), cells)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain search the index must agree with: every candidate,
    /// `strsim`'s character Levenshtein distance.
    fn plain<'a>(word: &str, exclude: Option<&str>, candidates: &[&'a str]) -> Option<&'a str> {
        let limit = word.chars().count() / 3;
        let mut best: Option<(usize, &str)> = None;
        for &c in candidates {
            if c == word || Some(c) == exclude {
                continue;
            }
            let d = if c.to_lowercase() == word.to_lowercase() {
                0
            } else {
                strsim::levenshtein(word, c)
            };
            if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| c)
    }

    #[test]
    fn conservative_suggestions() {
        let ids = ["html", "css", "game-logic"];
        let s = Suggester::new(ids);
        assert_eq!(s.did_you_mean("htm", None), r#" (did you mean "html"?)"#);
        assert_eq!(s.did_you_mean("CSS", None), r#" (did you mean "css"?)"#);
        assert_eq!(
            s.did_you_mean("game_logic", None),
            r#" (did you mean "game-logic"?)"#
        );
        assert_eq!(s.did_you_mean("js", None), "");
        assert_eq!(s.did_you_mean("", None), "");
        assert_eq!(s.did_you_mean("html", None), "");
        assert_eq!(s.did_you_mean("htmx", Some("html")), "");
    }

    #[test]
    fn ties_go_to_the_first_candidate() {
        // "abcd" is one edit from both; the one listed first wins, whatever
        // the trie's (alphabetical) walking order.
        let s = Suggester::new(["abce", "abcx", "abzd"]);
        assert_eq!(s.suggest("abcd", None), Some("abce"));
        let s = Suggester::new(["abzd", "abcx", "abce"]);
        assert_eq!(s.suggest("abcd", None), Some("abzd"));
        // A case-only difference beats any edit.
        let s = Suggester::new(["abcx", "ABCD"]);
        assert_eq!(s.suggest("abcd", None), Some("ABCD"));
    }

    #[test]
    fn many_near_misses_stay_cheap() {
        // 10,000 generated ids, each misspelt: every answer is right, and
        // the walk stays far below its cap (a plain search would do 10,000
        // comparisons per word).
        let ids: Vec<String> = (0..10_000).map(|i| format!("task-{i:04}")).collect();
        let s = Suggester::new(ids.iter().map(String::as_str));
        for (i, id) in ids.iter().enumerate().step_by(97) {
            let typo = id.replacen("task", "taks", 1);
            assert_eq!(s.suggest(&typo, None), Some(id.as_str()), "{typo}");
            let extra = format!("{id}x");
            assert_eq!(s.suggest(&extra, None), Some(id.as_str()), "{extra}");
            assert!(s.suggest(&extra, Some(id)).is_some(), "{i}");
        }
    }

    /// The walk's cost per word stays near constant as the plan grows
    /// (counted in table cells, not timed): a near miss of a generated id
    /// (`taks-01234`, 11 cells per row) costs at most 60 rows of the table
    /// among 1,500, 24,000 or 96,000 ids. Walked in character order it
    /// cost 65 rows per word at 1,500 ids and 98 at 24,000; best first,
    /// 36 → 47 → 55 at 1,500 / 24,000 / 96,000.
    #[test]
    fn a_near_miss_costs_the_same_in_a_larger_plan() {
        for n in [1_500, 24_000, 96_000] {
            let ids: Vec<String> = (0..n).map(|i| format!("task-{i:05}")).collect();
            let s = Suggester::new(ids.iter().map(String::as_str));
            let mut total = 0;
            let mut words = 0;
            for id in ids.iter().step_by(n / 50) {
                let typo = id.replacen("task", "taks", 1);
                let (found, cells) = s.search(&typo, None);
                assert_eq!(found, Some(id.as_str()), "{typo}");
                total += cells;
                words += 1;
            }
            let rows = total / words / 11;
            assert!(
                rows <= 60,
                "{n} ids: {rows} rows of the table per near miss"
            );
        }
    }

    #[test]
    fn long_similar_ids_find_their_match_within_the_cap() {
        // Long ids allow many edits (a third of the length), so pruning
        // starts late; walking the branch that matches the word first
        // finds the close candidate early and tightens the bound.
        let ids: Vec<String> = (0..10_000)
            .map(|i| format!("implement-feature-{i:05}-for-the-user-interface"))
            .collect();
        let s = Suggester::new(ids.iter().map(String::as_str));
        for id in ids.iter().step_by(331) {
            let typo = id
                .replacen("feature", "featrue", 1)
                .replacen("user", "usr", 1);
            assert_eq!(s.suggest(&typo, None), Some(id.as_str()), "{typo}");
        }
    }

    #[test]
    fn a_huge_word_is_bounded() {
        let long = "x".repeat(200_000);
        let near = format!("{long}y");
        let s = Suggester::new([long.as_str(), "a"]);
        // The cap stops the walk long before the candidate's end: no
        // suggestion, but no minutes spent either.
        assert_eq!(s.suggest(&near, None), None);
    }

    proptest! {
        #[test]
        fn agrees_with_the_plain_search(
            candidates in proptest::collection::vec("[abcAB-]{0,7}", 0..12),
            word in "[abcAB-]{0,8}",
            exclude_first in any::<bool>(),
        ) {
            let refs: Vec<&str> = candidates.iter().map(String::as_str).collect();
            let exclude = if exclude_first { refs.first().copied() } else { None };
            let s = Suggester::new(refs.iter().copied());
            prop_assert_eq!(s.suggest(&word, exclude), plain(&word, exclude, &refs));
        }
    }
}
