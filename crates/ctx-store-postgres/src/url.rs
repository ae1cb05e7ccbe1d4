//! Store URLs: reading them (with the libpq `PG*` variables for what the
//! URL leaves out) and showing them without their password.
//!
//! A password in a URL is a credential like an API key: it is used to
//! connect and never printed, logged or stored. Every message of this crate
//! names the database by [`StoreUrl::display`], which has none.

use std::str::FromStr;

use tokio_postgres::config::{Host, SslMode};

use crate::error::{Error, Result};

/// A parsed store URL.
#[derive(Clone)]
pub struct StoreUrl {
    pub(crate) config: tokio_postgres::Config,
    display: String,
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the config: it holds the password.
        f.debug_tuple("StoreUrl").field(&self.display).finish()
    }
}

impl StoreUrl {
    /// Reads `raw` (`postgres://user:password@host:port/db?sslmode=...`,
    /// or libpq's `key=value` form), filling what it leaves out from
    /// `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE` and
    /// `PGSSLMODE` as `env` answers them (pass `|k| std::env::var(k).ok()`).
    ///
    /// ```
    /// use ctx_store_postgres::StoreUrl;
    /// let url = StoreUrl::parse("postgres://ci:s3cret@db.example:5433/ctx", |_| None).unwrap();
    /// assert_eq!(url.display(), "postgres://ci@db.example:5433/ctx");
    /// ```
    pub fn parse(raw: &str, env: impl Fn(&str) -> Option<String>) -> Result<StoreUrl> {
        let mut config = tokio_postgres::Config::from_str(raw).map_err(|e| Error::Url {
            url: redact(raw),
            // The driver's message names the part it could not read; it
            // does not echo the input.
            message: e.to_string(),
        })?;
        if config.get_hosts().is_empty() {
            config.host(env("PGHOST").as_deref().unwrap_or("localhost"));
        }
        if config.get_ports().is_empty()
            && let Some(p) = env("PGPORT")
        {
            let port = p.parse::<u16>().map_err(|_| Error::Url {
                url: redact(raw),
                message: format!("PGPORT `{p}` is not a port number"),
            })?;
            config.port(port);
        }
        if config.get_user().is_none() {
            let user = env("PGUSER")
                .or_else(|| env("USER"))
                .unwrap_or_else(|| "postgres".into());
            config.user(&user);
        }
        if config.get_password().is_none()
            && let Some(p) = env("PGPASSWORD")
        {
            config.password(p);
        }
        if config.get_dbname().is_none()
            && let Some(d) = env("PGDATABASE")
        {
            config.dbname(&d);
        }
        if !raw.contains("sslmode")
            && let Some(m) = env("PGSSLMODE")
        {
            config.ssl_mode(match m.as_str() {
                "disable" => SslMode::Disable,
                "prefer" => SslMode::Prefer,
                "require" => SslMode::Require,
                other => {
                    return Err(Error::Url {
                        url: redact(raw),
                        message: format!(
                            "PGSSLMODE `{other}` is not one of disable, prefer, require"
                        ),
                    });
                }
            });
        }
        config.application_name("ctx");
        config.connect_timeout(std::time::Duration::from_secs(5));
        let display = display_of(&config);
        Ok(StoreUrl { config, display })
    }

    /// The URL without its password: what messages and listings show.
    pub fn display(&self) -> &str {
        &self.display
    }
}

/// A user, host or database name as shown: one holding `@` (or, but for
/// a host, which may be an IPv6 address, `:`) is hidden, since it can only
/// come from a URL the driver read differently from its writer's intent —
/// `postgres://@/:pw@h/d` has the database `:pw@h/d` — and may hold a
/// password.
fn shown(part: &str, colon_ok: bool) -> String {
    if part.contains('@') || (!colon_ok && part.contains(':')) {
        "[hidden]".into()
    } else {
        part.to_string()
    }
}

fn display_of(config: &tokio_postgres::Config) -> String {
    let user = shown(config.get_user().unwrap_or(""), false);
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => shown(h, true),
        #[cfg(unix)]
        Some(Host::Unix(p)) => shown(&p.display().to_string(), true),
        None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    let db = config
        .get_dbname()
        .map_or_else(|| user.clone(), |d| shown(d, false));
    format!("postgres://{user}@{host}{port}/{db}")
}

pub use ctx_store::url::redact;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_the_display() {
        for raw in [
            "postgres://u:hunter2@h:1/d",
            "postgresql://u:hunter2@h/d?sslmode=disable",
            "host=h user=u password=hunter2 dbname=d",
            "postgres://u@h/d?password=hunter2",
        ] {
            let url = StoreUrl::parse(raw, |_| None).unwrap();
            assert!(!url.display().contains("hunter2"), "{}", url.display());
            assert!(!format!("{url:?}").contains("hunter2"));
            assert!(!redact(raw).contains("hunter2"), "{}", redact(raw));
        }
    }

    proptest::proptest! {
        /// What fuzz/fuzz_targets/store_url.rs checks, on every test run:
        /// any text around a password never shows the password.
        #[test]
        fn no_text_shows_a_password(text in "\\PC{0,40}") {
            const SECRET: &str = "Zq7secretXw";
            proptest::prop_assume!(!text.contains(SECRET));
            for raw in [
                format!("postgres://u:{SECRET}@{text}"),
                format!("{text} password={SECRET}"),
                format!("postgresql://{text}:{SECRET}@h/d"),
            ] {
                let shown = match StoreUrl::parse(&raw, |_| None) {
                    Ok(url) => format!("{} {url:?}", url.display()),
                    Err(e) => e.to_string(),
                };
                proptest::prop_assert!(!shown.contains(SECRET), "{raw:?} shown as {shown:?}");
            }
        }
    }

    #[test]
    fn env_fills_what_the_url_leaves_out() {
        let env = |k: &str| match k {
            "PGHOST" => Some("db".to_string()),
            "PGPORT" => Some("6543".to_string()),
            "PGUSER" => Some("w".to_string()),
            "PGPASSWORD" => Some("pw".to_string()),
            "PGDATABASE" => Some("runs".to_string()),
            _ => None,
        };
        let url = StoreUrl::parse("postgres://", env).unwrap();
        assert_eq!(url.display(), "postgres://w@db:6543/runs");
        assert_eq!(url.config.get_password(), Some(&b"pw"[..]));
        // The URL wins over the environment; a URL naming a host gets the
        // driver's default port with it.
        let url = StoreUrl::parse("postgres://x@y/z", env).unwrap();
        assert_eq!(url.display(), "postgres://x@y:5432/z");
    }

    #[test]
    fn a_malformed_url_is_refused_without_its_password() {
        let e = StoreUrl::parse("postgres://u:hunter2@h:notaport/d", |_| None).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("store URL"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
        let e = StoreUrl::parse("postgres://u@h/d", |k| {
            (k == "PGSSLMODE").then(|| "verify-full".to_string())
        })
        .unwrap_err();
        assert!(e.to_string().contains("PGSSLMODE"), "{e}");
    }
}
