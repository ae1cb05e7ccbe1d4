//! The store's errors. Every one names the database by its redacted URL
//! (never a password) and keeps the driver's error as its source.

/// What went wrong talking to the shared store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store URL (or the `PG*` variables) could not be read.
    #[error("store URL `{url}`: {message}")]
    Url {
        /// The URL, password removed.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// No server answered, or the connection broke and did not come back
    /// within the reconnect window.
    #[error("cannot connect to {url}: {source}")]
    Unreachable {
        /// The URL, password removed.
        url: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server refused the user or password.
    #[error(
        "{url}: authentication failed ({source}); check the user and password (PGPASSWORD or the URL)"
    )]
    Auth {
        /// The URL, password removed.
        url: String,
        /// The server's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database was made by a newer ctx.
    #[error(
        "{url}: the store's schema is version {found}, newer than this ctx knows ({known}); upgrade ctx, or use another database"
    )]
    NewerSchema {
        /// The URL, password removed.
        url: String,
        /// The version in the database.
        found: i32,
        /// The newest version this build knows.
        known: i32,
    },
    /// The database is not a ctx store and is not empty.
    #[error("{url}: not a ctx execution store: {reason}; give ctx an empty database of its own")]
    Foreign {
        /// The URL, password removed.
        url: String,
        /// What was found instead.
        reason: String,
    },
    /// A statement failed.
    #[error("{url}: {context}: {source}")]
    Query {
        /// The URL, password removed.
        url: String,
        /// What was being done (naming the run and task).
        context: String,
        /// The server's or driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// No run with this id.
    #[error("{url}: no run `{run_id}`")]
    NoRun {
        /// The URL, password removed.
        url: String,
        /// The id asked for.
        run_id: String,
    },
    /// A resume with a changed plan while workers hold claims in the run:
    /// their results were asked for under the old plan.
    #[error(
        "{url}: run `{run_id}`: {claimed} task(s) are being run by workers now; a changed plan can resume it once they finish or their leases lapse"
    )]
    Busy {
        /// The URL, password removed.
        url: String,
        /// The run.
        run_id: String,
        /// Tasks claimed under live leases.
        claimed: i64,
    },
    /// A stored plan or result that does not read back.
    #[error("{url}: run `{run_id}`: {what} does not read back: {source}")]
    Corrupt {
        /// The URL, password removed.
        url: String,
        /// The run.
        run_id: String,
        /// The plan, or a task's result.
        what: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The store's own runtime could not start or stopped.
    #[error("the PostgreSQL store's runtime: {0}")]
    Runtime(String),
    /// A decision on an approval gate was refused (nothing was written).
    #[error(transparent)]
    Decision(Box<ctx_store::DecisionRefused>),
}

impl Error {
    /// Whether this is a connection, authentication, schema or foreign
    /// database problem (the store could not be opened), as opposed to a
    /// failure of one statement or a missing run.
    pub fn is_open_failure(&self) -> bool {
        matches!(
            self,
            Error::Url { .. }
                | Error::Unreachable { .. }
                | Error::Auth { .. }
                | Error::NewerSchema { .. }
                | Error::Foreign { .. }
        )
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for ctx_store::StoreError {
    fn from(e: Error) -> Self {
        ctx_store::StoreError::wrap(e)
    }
}
