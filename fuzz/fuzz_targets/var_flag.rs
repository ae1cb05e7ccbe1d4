//! Arbitrary text as `--var` arguments (ctx-prompt `vars`), the reader
//! every command that takes `--var` shares. Nothing may panic, and the
//! reader means what it documents: an argument without `=` is a syntax
//! error; a name that is not `[A-Z][A-Z0-9_]*` is refused naming it; a
//! plain value comes back byte for byte, and `@@text` comes back as
//! `@text`; every error message names the argument or the variable.
//!
//! Values naming a file (`NAME=@PATH`, `NAME=@-`) are not read: the
//! fuzzer would open whatever path it spells, standard input included,
//! and a read blocks or depends on the machine. They still go through
//! the name check, which comes first.
//!
//! Input layout: arguments separated by NUL bytes; each is parsed alone,
//! then the list together, where a name given twice must be refused.

#![no_main]

use std::collections::BTreeSet;

use ctx_prompt::vars::{VarError, parse_var, parse_vars};
use libfuzzer_sys::fuzz_target;

/// Whether `arg` would make the reader open a file or standard input.
fn reads_a_file(arg: &str) -> bool {
    arg.split_once('=')
        .is_some_and(|(_, v)| v.starts_with('@') && !v.starts_with("@@") && v.len() > 1)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let args: Vec<&str> = text.split('\0').collect();
    let mut valid_names = BTreeSet::new();
    let mut repeated = false;
    for arg in &args {
        if reads_a_file(arg) {
            continue;
        }
        match parse_var(arg, 64) {
            Ok((name, value)) => {
                let (n, v) = arg.split_once('=').expect("a value needs `=`");
                assert_eq!(name, n);
                let expected = match v.strip_prefix("@@") {
                    Some(lit) => format!("@{lit}"),
                    None => v.to_string(),
                };
                assert_eq!(value, expected, "{arg:?}");
                repeated |= !valid_names.insert(name);
            }
            Err(e) => {
                let shown = e.to_string();
                match &e {
                    VarError::Syntax { arg: a } => {
                        assert!(!arg.contains('='));
                        assert_eq!(a, arg);
                    }
                    VarError::BadName { arg: a, name } => {
                        assert_eq!(a, arg);
                        assert_eq!(Some(name.as_str()), arg.split_once('=').map(|(n, _)| n));
                    }
                    VarError::NoFile { arg: a } => {
                        assert_eq!(a, arg);
                        assert!(arg.ends_with("=@") || arg.split_once('=').is_some_and(|(_, v)| v == "@"));
                    }
                    other => panic!("{arg:?}: no file was read, yet {other:?}"),
                }
                assert!(shown.contains(arg), "{shown:?} does not name {arg:?}");
            }
        }
    }
    if args.iter().any(|a| reads_a_file(a)) {
        return;
    }
    match parse_vars(&args, 64) {
        Ok(values) => {
            assert!(!repeated);
            assert_eq!(values.keys().cloned().collect::<BTreeSet<_>>(), valid_names);
        }
        Err(VarError::Repeated { name }) => assert!(valid_names.contains(&name)),
        Err(_) => {}
    }
});
