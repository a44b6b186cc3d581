//! Who is calling: the bearer tokens of a tokens file (or one made at start) and the
//! principal each names, kept and compared as digests; the tokens in force, reloaded from
//! their file; failed sign-ins counted by address; and the secrets the server makes. A
//! leaf: it knows no other module of the crate, so the transports, the MCP translation
//! and the dashboard all stand on it.

mod keys;
pub(crate) mod oauth;
mod secret;
mod throttle;
mod tokens;

pub(crate) use keys::Keys;
pub(crate) use secret::{hex, random_hex, random_key, sha256_hex};
pub use throttle::DEFAULT_FREE_FAILURES;
pub(crate) use throttle::{ClientAddr, Throttle, counted_as, retry_after};
pub use tokens::Tokens;
pub(crate) use tokens::{Principal, TokenDigest, digest};
