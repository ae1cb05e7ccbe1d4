//! # ctx-table: aligned plain-text tables
//!
//! Every text table ctx prints (`ctx run`'s summary, `ctx runs list`,
//! `ctx plan cost`, `ctx prices`, `ctx render --preflight`, `ctx eval`)
//! goes through [`render`], so they all align alike: two spaces between
//! columns, text left-aligned, figures right-aligned, no trailing spaces,
//! one line per row with a final line break.
//!
//! Widths count `char`s, not display columns: the output is the same
//! bytes on every terminal and in every golden file, which is what the
//! tables are for (a wide CJK glyph may look misaligned; it is never
//! reordered or cut). This is also why the tables are not comfy-table's
//! or tabled's: both measure display width and draw borders and padding
//! of their own, and both would change every pinned output for no gain
//! (docs/architecture.md, "Dependencies").
//!
//! ```
//! let rows = vec![vec!["a".to_string(), "1".to_string()], vec!["long".to_string(), "100".to_string()]];
//! assert_eq!(
//!     ctx_table::render(&["TASK", "N"], &[false, true], &rows),
//!     "TASK    N\na       1\nlong  100\n"
//! );
//! ```

mod printable;

pub use printable::{is_unsafe, printable, printable_lines};

/// Renders `header` and `rows` as aligned text; `right[i]` right-aligns
/// column `i` (a column past the end of `right` is left-aligned). A row
/// shorter than the header leaves its last cells empty; cells past the
/// header's length are printed unaligned. Each cell is shown
/// [`printable`]: a control character or a bidirectional override in a
/// cell is escaped, never sent to the terminal.
pub fn render<R, S>(header: &[&str], right: &[bool], rows: &[R]) -> String
where
    R: AsRef<[S]>,
    S: AsRef<str>,
{
    // Every cell through the one terminal escaper: a cell is often
    // someone else's text (an id, a model name, an error's first line).
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.as_ref().iter().map(|c| printable(c.as_ref())).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            let n = cell.chars().count();
            match widths.get_mut(i) {
                Some(w) => *w = (*w).max(n),
                None => widths.push(n),
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(cell.chars().count());
            if right.get(i).copied().unwrap_or(false) {
                text.extend(std::iter::repeat_n(' ', pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in &rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn aligns_by_characters_and_trims() {
        let rows = vec![
            vec!["é".to_string(), "1".to_string(), String::new()],
            vec!["abc".to_string(), "100".to_string(), String::new()],
        ];
        assert_eq!(
            render(&["k", "n", "x"], &[false, true, false], &rows),
            "k      n  x\né      1\nabc  100\n"
        );
    }

    #[test]
    fn an_empty_table_is_its_header() {
        assert_eq!(
            render::<Vec<String>, String>(&["A", "B"], &[], &[]),
            "A  B\n"
        );
    }

    proptest! {
        /// Every line is trimmed, and every right-aligned column ends at
        /// the same character offset on every line that has it.
        #[test]
        fn columns_line_up(rows in proptest::collection::vec(
            proptest::collection::vec("[a-zé0-9]{0,6}", 3), 0..8)) {
            let text = render(&["ID", "NUM", "LAST"], &[false, true, false], &rows);
            let lines: Vec<&str> = text.lines().collect();
            prop_assert_eq!(lines.len(), rows.len() + 1);
            for l in &lines {
                prop_assert_eq!(l.trim_end(), *l);
            }
            let w0 = rows.iter().map(|r| r[0].chars().count()).chain([2]).max().unwrap();
            let w1 = rows.iter().map(|r| r[1].chars().count()).chain([3]).max().unwrap();
            for (row, l) in rows.iter().zip(&lines[1..]) {
                let chars: Vec<char> = l.chars().collect();
                let end = w0 + 2 + w1;
                let num: String = chars.get(w0 + 2..end.min(chars.len())).unwrap_or(&[]).iter().collect();
                prop_assert_eq!(num.trim_start(), row[1].as_str());
            }
        }
    }
}
