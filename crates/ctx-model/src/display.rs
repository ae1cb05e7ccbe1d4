//! Counts as every message and table writes them: `1 task`, `3 tasks`,
//! `0 entities`. Defined once, here in the vocabulary every crate shares,
//! because the same noun counted two ways in two outputs ("1 tasks" in
//! one, "1 task" in another) is the kind of drift a user notices first.

/// `n` and the noun for it: `one` when `n` is 1, else `many`
/// (`count(1, "task", "tasks")` is `1 task`, `count(0, ...)` `0 tasks`).
///
/// ```
/// use ctx_model::display::count;
/// assert_eq!(count(1, "entity", "entities"), "1 entity");
/// assert_eq!(count(3, "entity", "entities"), "3 entities");
/// ```
pub fn count<N>(n: N, one: &str, many: &str) -> String
where
    N: std::fmt::Display + PartialEq + From<u8>,
{
    let noun = if n == N::from(1) { one } else { many };
    format!("{n} {noun}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(0, "task", "tasks"), "0 tasks");
        assert_eq!(count(1, "task", "tasks"), "1 task");
        assert_eq!(count(2, "task", "tasks"), "2 tasks");
        assert_eq!(count(11, "problem", "problems"), "11 problems");
        assert_eq!(count(1_u32, "call", "calls"), "1 call");
        assert_eq!(
            count(u64::MAX, "call", "calls"),
            "18446744073709551615 calls"
        );
    }
}
