//! TLS to PostgreSQL as libpq reads `sslmode` and `sslrootcert`, over rustls.
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (default) | if the server offers it, else plain | checked as `verify-ca` when a root file is there, else not |
//! | `require` | always | the same as `prefer` |
//! | `verify-ca` | always | signed by a root of `sslrootcert` |
//! | `verify-full` | always | signed so, and made out to the host connected to |
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the system's roots (then
//! only `verify-full` is accepted, as libpq does); by default `~/.postgresql/root.crt`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio_postgres::config::SslMode as WireMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::store::StoreError;

/// libpq's `sslmode`, all five values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum SslMode {
    Disable,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub(super) fn parse(text: &str) -> Result<SslMode, StoreError> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` tries plain text first: a downgrade by design.
            other => {
                return Err(StoreError::BadLocation(format!(
                    "sslmode={other} is not supported: use disable, prefer, require, \
                     verify-ca or verify-full"
                )));
            }
        })
    }

    /// What `tokio-postgres` is told: whether to ask for TLS, and whether to insist.
    pub(super) fn wire(self) -> WireMode {
        match self {
            SslMode::Disable => WireMode::Disable,
            SslMode::Prefer => WireMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => WireMode::Require,
        }
    }
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Roots {
    File(PathBuf),
    System,
}

impl Roots {
    pub(super) fn parse(text: &str) -> Roots {
        if text == "system" {
            Roots::System
        } else {
            Roots::File(PathBuf::from(text))
        }
    }
}

/// The connector for `mode`, with the roots named (or libpq's default file).
pub(super) fn connector(
    mode: SslMode,
    roots: Option<&Roots>,
) -> Result<MakeRustlsConnect, StoreError> {
    // ring builds with a C compiler alone (aws-lc-rs may want cmake); rustls marks it
    // deprecated for lacking post-quantum key exchange, which PostgreSQL's OpenSSL does
    // not offer by default either.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let default_file = default_root_file();
    let roots = match (roots, &default_file) {
        (Some(roots), _) => Some(roots.clone()),
        (None, Some(file)) if file.exists() => Some(Roots::File(file.clone())),
        _ => None,
    };
    if roots == Some(Roots::System) && mode != SslMode::VerifyFull {
        return Err(StoreError::BadLocation(
            "sslrootcert=system trusts every public CA: it needs sslmode=verify-full".into(),
        ));
    }
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, roots) {
        (SslMode::Disable, _) | (SslMode::Prefer | SslMode::Require, None) => Arc::new(AnyName {
            chain: None,
            provider: provider.clone(),
        }),
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            let file = default_file.map_or("~/.postgresql/root.crt".into(), |file| {
                file.display().to_string()
            });
            return Err(StoreError::BadLocation(format!(
                "sslmode={} checks the server's certificate, but the root certificate file \
                 {file} does not exist: name a CA file with sslrootcert=FILE, use the \
                 system's roots with sslrootcert=system, or use sslmode=require to encrypt \
                 without checking",
                mode_name(mode)
            )));
        }
        (mode, Some(roots)) => {
            let store = Arc::new(load(&roots)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(store, provider.clone())
                .build()
                .map_err(|error| StoreError::BadLocation(format!("sslrootcert: {error}")))?;
            if mode == SslMode::VerifyFull {
                webpki
            } else {
                Arc::new(AnyName {
                    chain: Some(webpki),
                    provider: provider.clone(),
                })
            }
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| StoreError::BadLocation(format!("TLS: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn mode_name(mode: SslMode) -> &'static str {
    match mode {
        SslMode::Disable => "disable",
        SslMode::Prefer => "prefer",
        SslMode::Require => "require",
        SslMode::VerifyCa => "verify-ca",
        SslMode::VerifyFull => "verify-full",
    }
}

/// libpq's default root file: `~/.postgresql/root.crt`.
fn default_root_file() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".postgresql/root.crt"))
}

fn load(roots: &Roots) -> Result<RootCertStore, StoreError> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(StoreError::BadLocation(
                    "sslrootcert=system: no root certificates found on this system".into(),
                ));
            }
        }
        Roots::File(path) => {
            let bad = |error: &dyn std::fmt::Display| {
                StoreError::BadLocation(format!("sslrootcert {}: {error}", path.display()))
            };
            for cert in CertificateDer::pem_file_iter(path).map_err(|error| bad(&error))? {
                store
                    .add(cert.map_err(|error| bad(&error))?)
                    .map_err(|error| bad(&error))?;
            }
            if store.is_empty() {
                return Err(bad(&"no PEM certificate in the file"));
            }
        }
    }
    Ok(store)
}

/// The checks short of `verify-full`: with a root store (`verify-ca`, or `prefer` and
/// `require` with a root file), the chain must lead to a trusted root and the name on it is
/// not checked; without one (`prefer` and `require`: libpq's rule), the server is not
/// authenticated. Either way the handshake's signatures are checked against the certificate
/// presented, with the provider's algorithms, as `WebPkiServerVerifier` checks them.
#[derive(Debug)]
struct AnyName {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // The name is checked last, once the chain holds: a name error means all else passed.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What a refused certificate means, in words, when `error` (or a cause) is one.
pub(super) fn certificate_refused(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    for error in super::causes(error) {
        if let Some(rustls::Error::InvalidCertificate(why)) = error.downcast_ref::<rustls::Error>()
        {
            return Some(format!(
                "the server's TLS certificate was refused ({why:?}): it must be signed by a \
                 root of sslrootcert{}",
                if matches!(
                    why,
                    CertificateError::NotValidForName
                        | CertificateError::NotValidForNameContext { .. }
                ) {
                    " and made out to the host name in the URL (sslmode=verify-full)"
                } else {
                    ""
                }
            ));
        }
    }
    None
}
