//! A JWT access token checked (RFC 9068, OAuth 2.1 §5.2): its signature by one of the
//! issuer's keys with an allowed algorithm that key's type admits, `iss` exactly the
//! issuer, `aud` holding this resource, `exp` and `nbf` with a minute's leeway, and a
//! `typ`, when it has one, of an access token.

use jsonwebtoken::{Algorithm, Header, Validation};
use serde_json::{Map, Value};

use super::Refused;
use super::jwks::Key;

/// The leeway on `exp` and `nbf`, for clocks a little apart.
const LEEWAY_SECS: u64 = 60;

/// The `typ` values of a token this server takes: an access token's (RFC 9068), and the
/// generic ones issuers that predate it give. Any other (an ID token's `id+jwt`, a
/// logout token's, a DPoP proof's) is another kind of token.
const TYPES: &[&str] = &["at+jwt", "application/at+jwt", "jwt", "application/jwt"];

/// The header of what looks like a JWT: three dot-separated parts, the first a JSON
/// header naming a known algorithm. `None` for anything else (an opaque token). A header
/// naming `none` or an unknown algorithm does not parse, and is refused by the caller.
pub(super) fn header(token: &str) -> Result<Option<Header>, Refused> {
    if token.split('.').count() != 3 {
        return Ok(None);
    }
    jsonwebtoken::decode_header(token)
        .map(Some)
        .map_err(|_| Refused::Malformed)
}

/// Whether `header` names an algorithm of `allowed`, and a type of access token.
pub(super) fn admissible(header: &Header, allowed: &[Algorithm]) -> Result<(), Refused> {
    if !allowed.contains(&header.alg) {
        return Err(Refused::Algorithm);
    }
    match &header.typ {
        Some(typ) if !TYPES.iter().any(|t| t.eq_ignore_ascii_case(typ)) => Err(Refused::Type),
        _ => Ok(()),
    }
}

/// The claims of `token`, signed by `key` with `alg` (which `admissible` let through),
/// issued by `issuer` for `audience`.
pub(super) fn claims(
    token: &str,
    key: &Key,
    alg: Algorithm,
    issuer: &str,
    audience: &str,
) -> Result<Map<String, Value>, Refused> {
    // The key's type decides which algorithms it verifies: the one named by the header,
    // alone, and only when the key admits it.
    if !key.algorithms.contains(&alg) {
        return Err(Refused::Algorithm);
    }
    let mut validation = Validation::new(alg);
    validation.leeway = LEEWAY_SECS;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.set_audience(&[audience]);
    validation.set_issuer(&[issuer]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
        .map_err(|error| Refused::from_jwt(&error))?;
    Ok(data.claims)
}

impl Refused {
    fn from_jwt(error: &jsonwebtoken::errors::Error) -> Refused {
        use jsonwebtoken::errors::ErrorKind;
        match error.kind() {
            ErrorKind::ExpiredSignature => Refused::Expired,
            ErrorKind::ImmatureSignature => Refused::NotYetValid,
            ErrorKind::InvalidAudience => Refused::Audience,
            ErrorKind::InvalidIssuer => Refused::Issuer,
            ErrorKind::InvalidSignature => Refused::Signature,
            ErrorKind::InvalidAlgorithm => Refused::Algorithm,
            ErrorKind::MissingRequiredClaim(_) => Refused::MissingClaim,
            _ => Refused::Malformed,
        }
    }
}
