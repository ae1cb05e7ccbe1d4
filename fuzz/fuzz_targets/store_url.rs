//! Arbitrary text as a `--store` URL (and as each `PG*` variable): nothing
//! may panic, and a password given in it never appears in what is shown:
//! neither the parsed URL's display and debug forms, nor the redacted text
//! of a URL that could not be parsed, nor the error message.

#![no_main]

use ctx_store_postgres::{StoreUrl, redact};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "Zq7secretXw";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The fuzzer's text around a known password, in both URL forms.
    for raw in [
        format!("postgres://u:{SECRET}@{text}"),
        format!("{text} password={SECRET}"),
        format!("postgresql://{text}:{SECRET}@h/d"),
    ] {
        let shown = match StoreUrl::parse(&raw, |k| (k == "PGPASSWORD").then(|| SECRET.to_string())) {
            Ok(url) => format!("{} {url:?}", url.display()),
            Err(e) => e.to_string(),
        };
        // The fuzzer may spell the secret itself in the host or user part;
        // only a secret it did not write must stay hidden.
        if !text.contains(SECRET) {
            assert!(!shown.contains(SECRET), "{raw:?} shown as {shown:?}");
        }
        let _ = redact(&raw);
    }
    let _ = StoreUrl::parse(text, |_| Some(text.to_string()));
});
