//! A shared store's URL as people are shown it: the rules a front end
//! needs to choose a store from a flag (`--store`) and to echo a value it
//! refuses, without the store adapter (and its driver) that opens one.
//! ctx-store-postgres re-exports both and uses [`redact`] for every URL it
//! names in an error.

/// Whether `s` names a PostgreSQL store (`postgres://` or
/// `postgresql://`) rather than the local SQLite one.
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// `raw` with anything that may be a password removed: in a URL, all
/// between `://` and the last `@` but the user name (up to the first `:`);
/// in the key=value form or a query string, the value of every
/// `password` key (quoted or not, spaces around `=` allowed). Used for
/// URLs that could not be parsed, so even a malformed one is never echoed
/// with its secret; it errs on the side of hiding.
pub fn redact(raw: &str) -> String {
    let mut out = raw.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        if let Some(at) = out[rest..].rfind('@') {
            let at = rest + at;
            let user_end = out[rest..at].find([':', '@']).map_or(at, |i| rest + i);
            out.replace_range(user_end..at, "");
        }
    }
    let mut from = 0;
    loop {
        let lower = out.to_ascii_lowercase();
        let Some(i) = lower[from..].find("password").map(|i| from + i) else {
            break;
        };
        let bytes = out.as_bytes();
        let mut j = i + "password".len();
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if j >= bytes.len() || bytes[j] != b'=' {
            from = i + 1;
            continue;
        }
        j += 1;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        let end = if bytes.get(j) == Some(&b'\'') {
            // A quoted value runs to the next unescaped quote (or the end).
            let mut k = j + 1;
            while k < bytes.len() && bytes[k] != b'\'' {
                k += if bytes[k] == b'\\' { 2 } else { 1 };
            }
            (k + 1).min(bytes.len())
        } else {
            out[j..].find([' ', '&']).map_or(out.len(), |k| j + k)
        };
        out.replace_range(j..end, "***");
        from = j + 3;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_value_is_shown_without_its_password() {
        assert_eq!(redact("mysql://u:hunter2@h/d"), "mysql://u@h/d");
        assert_eq!(redact("host=h password=hunter2"), "host=h password=***");
        assert!(is_postgres_url("postgresql://h/d"));
        assert!(!is_postgres_url("sqlite"));
    }
}
