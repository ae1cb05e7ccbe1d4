//! Aligned plain-text tables for the reports: two spaces between columns,
//! text left-aligned, figures right-aligned, no trailing spaces. Widths
//! count characters, so the output is the same bytes on every terminal.

/// Renders `header` and `rows`; `right[i]` right-aligns column `i`.
pub(crate) fn render<const N: usize>(
    header: [&str; N],
    rows: &[[String; N]],
    right: [bool; N],
) -> String {
    let mut width = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            let pad = width[i].saturating_sub(cell.chars().count());
            if right[i] {
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
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligns_by_characters_and_trims() {
        let rows = [
            ["é".to_string(), "1".to_string(), String::new()],
            ["abc".to_string(), "100".to_string(), String::new()],
        ];
        assert_eq!(
            super::render(["k", "n", "x"], &rows, [false, true, false]),
            "k      n  x\né      1\nabc  100\n"
        );
    }
}
