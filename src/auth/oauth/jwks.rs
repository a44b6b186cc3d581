//! The issuer's signing keys (its JWKS), by key id. Fetched at the first token, again
//! when a token names a key id not among them (a key the issuer just rotated in), and
//! again when they are `--oauth-jwks-max-age` old; each fetch replaces them all, so a key
//! the issuer dropped is dropped here.
//!
//! Invariant: the JWKS is fetched at most once per `--oauth-jwks-min-refresh`, however
//! many tokens name unknown key ids at once: a flood of made-up key ids costs the issuer
//! one request per interval, and the tokens wait on one fetch, not one each.
//!
//! Invariant: a symmetric (`oct`) key is never taken from a JWKS, and each key is used
//! only for the algorithms of its own type (and its `alg`, when it names one): a token's
//! header chooses among the issuer's keys, never how a key is used.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use parking_lot::RwLock;
use serde_json::Value;

use super::fetch::{FetchError, Fetcher};

/// The most keys taken from one JWKS.
const MAX_KEYS: usize = 64;

/// One of the issuer's public keys.
pub(crate) struct Key {
    pub(crate) kid: Option<String>,
    pub(crate) decoding: DecodingKey,
    /// The algorithms it may verify: those of its type and curve, narrowed to its `alg`.
    pub(crate) algorithms: Vec<Algorithm>,
}

/// The keys in force, and when they were fetched.
pub(crate) struct KeySet {
    fetcher: Fetcher,
    min_refresh: Duration,
    max_age: Duration,
    keys: RwLock<Arc<Keys>>,
    /// Held while fetching, so that fetches never overlap.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Keys {
    keys: Arc<Vec<Key>>,
    /// When the last fetch was made, whether it worked or not.
    fetched: Option<Instant>,
}

impl KeySet {
    pub(crate) fn new(fetcher: Fetcher, min_refresh: Duration, max_age: Duration) -> KeySet {
        KeySet {
            fetcher,
            min_refresh,
            max_age,
            keys: RwLock::default(),
            fetching: tokio::sync::Mutex::default(),
        }
    }

    /// The key of id `kid` (for a token that names none, the one key that may verify
    /// `algorithm`), fetching the keys from `jwks_uri` first when that may find it.
    pub(crate) async fn key(
        &self,
        jwks_uri: &str,
        kid: Option<&str>,
        algorithm: Algorithm,
    ) -> Option<KeyRef> {
        let fresh = |keys: &Keys| keys.fetched.is_some_and(|at| at.elapsed() < self.max_age);
        let current = self.keys.read().clone();
        if fresh(&current)
            && let Some(key) = KeyRef::find(&current, kid, algorithm)
        {
            return Some(key);
        }
        let _fetching = self.fetching.lock().await;
        // Another token may have fetched them meanwhile.
        let current = self.keys.read().clone();
        let may_fetch = current
            .fetched
            .is_none_or(|at| at.elapsed() >= self.min_refresh);
        if !may_fetch || (fresh(&current) && KeyRef::find(&current, kid, algorithm).is_some()) {
            return KeyRef::find(&current, kid, algorithm);
        }
        let fetched = self.fetch(jwks_uri).await;
        let mut keys = self.keys.write();
        match fetched {
            Ok(found) => {
                tracing::debug!(keys = found.len(), "the issuer's keys were fetched");
                *keys = Arc::new(Keys {
                    keys: Arc::new(found),
                    fetched: Some(Instant::now()),
                });
            }
            Err(error) => {
                // The keys in force stay: an issuer that cannot be reached dropped none.
                tracing::warn!("the issuer's keys could not be fetched: {error}");
                *keys = Arc::new(Keys {
                    keys: keys.keys.clone(),
                    fetched: Some(Instant::now()),
                });
            }
        }
        KeyRef::find(&keys, kid, algorithm)
    }

    async fn fetch(&self, jwks_uri: &str) -> Result<Vec<Key>, FetchError> {
        let document = self.fetcher.get_json(jwks_uri).await?;
        Ok(parse(&document))
    }
}

/// A key found, shared with the set it came from.
pub(crate) struct KeyRef {
    keys: Arc<Vec<Key>>,
    at: usize,
}

impl KeyRef {
    fn find(keys: &Keys, kid: Option<&str>, algorithm: Algorithm) -> Option<KeyRef> {
        let fits = |key: &Key| key.algorithms.contains(&algorithm);
        let at = match kid {
            Some(kid) => keys
                .keys
                .iter()
                .position(|key| key.kid.as_deref() == Some(kid))?,
            None => {
                let mut fitting = keys.keys.iter().enumerate().filter(|(_, key)| fits(key));
                let (at, _) = fitting.next()?;
                // Without a key id, only an unambiguous key is taken.
                if fitting.next().is_some() {
                    return None;
                }
                at
            }
        };
        Some(KeyRef {
            keys: keys.keys.clone(),
            at,
        })
    }

    pub(crate) fn key(&self) -> &Key {
        &self.keys[self.at]
    }
}

/// The signing keys of a JWKS document that this server may use; the others (symmetric
/// keys, encryption keys, keys it cannot read) are left out.
fn parse(document: &Value) -> Vec<Key> {
    let Some(keys) = document["keys"].as_array() else {
        return Vec::new();
    };
    keys.iter()
        .filter_map(|value| serde_json::from_value::<Jwk>(value.clone()).ok())
        .filter_map(|jwk| usable(&jwk))
        .take(MAX_KEYS)
        .collect()
}

/// The key of `jwk`, if it is a public signing key of a type this server verifies.
fn usable(jwk: &Jwk) -> Option<Key> {
    if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let by_type: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        // `oct`: a shared secret, never a key of a JWKS this server takes.
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => by_type,
        Some(named) => by_type
            .into_iter()
            .filter(|algorithm| key_algorithm(*algorithm) == Some(named))
            .collect(),
    };
    if algorithms.is_empty() {
        return None;
    }
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        decoding,
        algorithms,
    })
}

/// The JWK `alg` of a JWS algorithm.
fn key_algorithm(algorithm: Algorithm) -> Option<KeyAlgorithm> {
    Some(match algorithm {
        Algorithm::RS256 => KeyAlgorithm::RS256,
        Algorithm::RS384 => KeyAlgorithm::RS384,
        Algorithm::RS512 => KeyAlgorithm::RS512,
        Algorithm::PS256 => KeyAlgorithm::PS256,
        Algorithm::PS384 => KeyAlgorithm::PS384,
        Algorithm::PS512 => KeyAlgorithm::PS512,
        Algorithm::ES256 => KeyAlgorithm::ES256,
        Algorithm::ES384 => KeyAlgorithm::ES384,
        Algorithm::EdDSA => KeyAlgorithm::EdDSA,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn symmetric_and_encryption_keys_are_left_out_of_a_jwks() {
        let document = json!({"keys": [
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQ"},
            {"kty": "EC", "kid": "enc", "use": "enc", "crv": "P-256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "kid": "sig", "crv": "P-256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "RSA", "kid": "rsa-ps", "alg": "PS256", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB"},
        ]});
        let keys = parse(&document);
        let kids: Vec<_> = keys.iter().map(|k| k.kid.clone().unwrap()).collect();
        assert_eq!(kids, ["sig", "rsa-ps"]);
        assert_eq!(keys[0].algorithms, [Algorithm::ES256]);
        assert_eq!(keys[1].algorithms, [Algorithm::PS256]);
    }
}
