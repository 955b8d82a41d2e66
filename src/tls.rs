//! The TLS context: redis-server's `tls-*` parameters turned into the
//! rustls server configurations new connections on `tls-port` are served
//! with (Redis's `tlsConfigure` in tls.c). The connection side (the
//! session over a socket) is `server::tls`.
//!
//! Why rustls with the ring provider: it is a pure-Rust TLS stack whose
//! crypto (ring) builds with the C compiler the crate already needs, with
//! no system OpenSSL headers and none of the cmake/clang that the aws-lc-rs
//! provider asks for. Certificates and keys are read from PEM with
//! `rustls-pki-types`.
//!
//! The context is built at start when `tls-port` (or `tls-replication`,
//! `tls-cluster`) is set, and again by CONFIG SET of any `tls-*` parameter
//! (Redis's `applyTlsCfg`): connections accepted after that use the new
//! context, those already open keep theirs. A context that cannot be built
//! is logged line by line with Redis's texts; at start the server then
//! exits 1 after `Failed to configure TLS. Check logs for more info.`, and
//! CONFIG SET fails with `Unable to update TLS configuration. Check server
//! logs.` leaving the previous values and context in place. (CONFIG SET
//! `tls-port` also binds the new port, and the network side moves to it;
//! see `commands::server::apply_tls` and `Shared::move_port`.)
//!
//! `tls-auth-clients` is read per connection as Redis reads it (no reload
//! needed): the context holds one configuration per mode — client
//! certificates not asked for (`no`), required (`yes`), or verified when
//! given (`optional`) — the last two only when a CA is configured.
//!
//! Where rustls differs from OpenSSL, and what keylock does about it:
//! - `tls-protocols`: rustls speaks TLSv1.2 and TLSv1.3 only. `TLSv1` and
//!   `TLSv1.1` are accepted in the list and logged as unsupported; a list
//!   naming neither supported version fails, as an invalid one does.
//! - `tls-ciphersuites` (TLSv1.3, OpenSSL names, `:`-separated):
//!   `TLS_AES_256_GCM_SHA384`, `TLS_AES_128_GCM_SHA256` and
//!   `TLS_CHACHA20_POLY1305_SHA256` map to rustls's suites; the CCM suites
//!   are logged as unsupported and skipped; any other name fails, as
//!   OpenSSL fails on a name it does not know.
//! - `tls-ciphers` (TLSv1.2, an OpenSSL cipher list): the six ECDHE AEAD
//!   ciphers rustls has are mapped by their OpenSSL names
//!   (`ECDHE-ECDSA-AES128-GCM-SHA256`, `ECDHE-RSA-AES256-GCM-SHA384`,
//!   `ECDHE-RSA-CHACHA20-POLY1305`, …) and the others (keywords such as
//!   `HIGH`, `!aNULL`, or ciphers rustls lacks) are ignored with a log
//!   line; a list with none of the six keeps rustls's TLSv1.2 defaults.
//! - `tls-key-file-pass`: an encrypted PKCS#8 key (what OpenSSL 3 writes,
//!   PBES2 with PBKDF2 or scrypt and AES) is decrypted with it (the
//!   `pkcs8` crate, as rustls reads no encrypted keys); a key in OpenSSL's
//!   traditional encrypted PEM fails with a log line saying how to convert
//!   it.
//! - `tls-session-caching` / `tls-session-cache-size` set the server's
//!   session cache; `tls-session-cache-timeout`, `tls-prefer-server-ciphers`
//!   (rustls always prefers the server's order) and `tls-dh-params-file`
//!   (rustls has no finite-field DH) are accepted and have no effect.
//! - Certificates (the server's and clients') must be X.509 v3: webpki
//!   refuses v1 ones (`UnsupportedCertVersion`), which OpenSSL accepts.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config_params::ConfigParams;
use crate::log;

/// `tls-auth-clients`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    No,
    Yes,
    Optional,
}

impl ClientAuth {
    pub fn of(params: &ConfigParams) -> ClientAuth {
        match params.value("tls-auth-clients") {
            Some("no") => ClientAuth::No,
            Some("optional") => ClientAuth::Optional,
            _ => ClientAuth::Yes,
        }
    }
}

/// The server configurations new TLS connections are served with, and
/// the client one this server connects to its master with.
pub struct TlsContext {
    no_auth: Arc<ServerConfig>,
    /// Client certificates required; None without a CA.
    required: Option<Arc<ServerConfig>>,
    /// Client certificates verified when given; None without a CA.
    optional: Option<Arc<ServerConfig>>,
    /// For `tls-replication`: the master's certificate checked against
    /// the CA (not its name, as Redis's OpenSSL client context checks
    /// none), with `tls-client-cert-file` / `tls-client-key-file` as this
    /// server's certificate, or `tls-cert-file` / `tls-key-file` when they
    /// are not set. None without a CA.
    client: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsContext")
    }
}

/// Whether the parameters ask for TLS, as Redis decides to configure it:
/// a `tls-port`, or TLS for replication or the cluster bus.
pub fn wanted(params: &ConfigParams) -> bool {
    params.value("tls-port").is_some_and(|p| p != "0")
        || params.value("tls-replication") == Some("yes")
        || params.value("tls-cluster") == Some("yes")
}

impl TlsContext {
    /// The configuration for a connection accepted now; None when the
    /// mode asks for client certificates and no CA is configured (the
    /// connection is refused).
    pub fn for_mode(&self, auth: ClientAuth) -> Option<Arc<ServerConfig>> {
        match auth {
            ClientAuth::No => Some(self.no_auth.clone()),
            ClientAuth::Yes => self.required.clone(),
            ClientAuth::Optional => self.optional.clone(),
        }
    }

    /// The configuration to connect to a master with (see `client`).
    pub fn client(&self) -> Option<Arc<rustls::ClientConfig>> {
        self.client.clone()
    }

    /// Redis's `tlsConfigure`: builds the context from the parameters;
    /// None, with what is wrong logged as Redis logs it, if it cannot be
    /// built.
    pub fn configure(params: &ConfigParams) -> Option<TlsContext> {
        Self::build(params).map_err(|line| log::warning(format_args!("{line}"))).ok()
    }

    fn build(params: &ConfigParams) -> Result<TlsContext, String> {
        let get = |name: &str| params.value(name).filter(|v| !v.is_empty());
        let cert_file = get("tls-cert-file").ok_or("No tls-cert-file configured!")?;
        let key_file = get("tls-key-file").ok_or("No tls-key-file configured!")?;
        let ca_file = get("tls-ca-cert-file");
        let ca_dir = get("tls-ca-cert-dir");
        let auth = ClientAuth::of(params);
        let for_peers = params.value("tls-replication") == Some("yes") || params.value("tls-cluster") == Some("yes");
        if (auth != ClientAuth::No || for_peers) && ca_file.is_none() && ca_dir.is_none() {
            return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
        }
        let versions = protocols(get("tls-protocols"))?;
        let provider = Arc::new(provider(get("tls-ciphers"), get("tls-ciphersuites"))?);
        let certs = load_certs(cert_file).map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
        let key = load_key(key_file, get("tls-key-file-pass")).map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
        let roots = match (ca_file, ca_dir) {
            (None, None) => None,
            _ => Some(Arc::new(
                load_roots(ca_file, ca_dir).map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?,
            )),
        };
        let sessions: Arc<dyn rustls::server::StoresServerSessions> = if params.value("tls-session-caching") == Some("no") {
            Arc::new(rustls::server::NoServerSessionStorage {})
        } else {
            let size = params.int("tls-session-cache-size").unwrap_or(20480);
            // OpenSSL takes 0 as no limit.
            let size = if size <= 0 { 20480 } else { size as usize };
            rustls::server::ServerSessionMemoryCache::new(size)
        };
        let build = |verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>| {
            let builder = ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&versions)
                .map_err(|e| format!("Failed to configure ciphers: {e}"))?;
            let builder = match verifier {
                Some(v) => builder.with_client_cert_verifier(v),
                None => builder.with_no_client_auth(),
            };
            let mut config = builder.with_single_cert(certs.clone(), key.clone_key()).map_err(|e| match e {
                // OpenSSL's words, as Redis logs them.
                rustls::Error::InconsistentKeys(_) => format!("Failed to load private key: {key_file}: key values mismatch"),
                e => format!("Failed to load private key: {key_file}: {e}"),
            })?;
            config.session_storage = sessions.clone();
            Ok::<_, String>(Arc::new(config))
        };
        let no_auth = build(None)?;
        let client = match &roots {
            None => None,
            Some(roots) => {
                let (certs, key) = match (get("tls-client-cert-file"), get("tls-client-key-file")) {
                    (Some(cert_file), Some(key_file)) => (
                        load_certs(cert_file).map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?,
                        load_key(key_file, get("tls-client-key-file-pass"))
                            .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?,
                    ),
                    _ => (certs.clone(), key.clone_key()),
                };
                let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
                    .build()
                    .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
                let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(&versions)
                    .map_err(|e| format!("Failed to configure ciphers: {e}"))?
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| format!("Failed to load private key: {e}"))?;
                Some(Arc::new(config))
            }
        };
        let (required, optional) = match roots {
            None => (None, None),
            Some(roots) => {
                let verifier = |optional: bool| {
                    let b = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
                    let b = if optional { b.allow_unauthenticated() } else { b };
                    b.build()
                        .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))
                };
                (Some(build(Some(verifier(false)?))?), Some(build(Some(verifier(true)?))?))
            }
        };
        Ok(TlsContext {
            no_auth,
            required,
            optional,
            client,
        })
    }
}

/// A master's certificate is checked against the CA, whatever name it
/// is for: Redis's client context (OpenSSL, `SSL_VERIFY_PEER` and no host
/// name set) checks the chain only, and replicas connect by address.
#[derive(Debug)]
struct AnyName(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `tls-protocols`, as Redis's `parseProtocolsConfig` reads it (both
/// TLSv1.2 and TLSv1.3 when unset).
fn protocols(list: Option<&str>) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let Some(list) = list else {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    };
    let mut versions = Vec::new();
    for token in list.split(' ').filter(|t| !t.is_empty()) {
        match token.to_ascii_lowercase().as_str() {
            "tlsv1.3" => versions.push(&rustls::version::TLS13),
            "tlsv1.2" => versions.push(&rustls::version::TLS12),
            "tlsv1" | "tlsv1.1" => log::warning(format_args!(
                "{token} is specified in tls-protocols but not supported by keylock's TLS library; ignored."
            )),
            _ => {
                return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into());
            }
        }
    }
    if versions.is_empty() {
        return Err(format!(
            "No tls-protocols supported by keylock's TLS library in '{list}': use TLSv1.2 and/or TLSv1.3."
        ));
    }
    Ok(versions)
}

/// OpenSSL's TLSv1.2 cipher names for the suites rustls has.
const TLS12_NAMES: &[(&str, rustls::CipherSuite)] = &[
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The TLSv1.3 suites by their OpenSSL (RFC) names.
const TLS13_NAMES: &[(&str, rustls::CipherSuite)] = &[
    ("TLS_AES_256_GCM_SHA384", rustls::CipherSuite::TLS13_AES_256_GCM_SHA384),
    ("TLS_AES_128_GCM_SHA256", rustls::CipherSuite::TLS13_AES_128_GCM_SHA256),
    ("TLS_CHACHA20_POLY1305_SHA256", rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
];

/// TLSv1.3 suites OpenSSL knows that rustls does not implement.
const TLS13_UNSUPPORTED: &[&str] = &["TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"];

/// ring's provider with the suites `tls-ciphers` and `tls-ciphersuites`
/// select, in the order they name them.
fn provider(ciphers: Option<&str>, ciphersuites: Option<&str>) -> Result<CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    let all = std::mem::take(&mut provider.cipher_suites);
    let pick = |suite: rustls::CipherSuite| all.iter().find(|s| s.suite() == suite).copied();
    let mut tls13 = Vec::new();
    match ciphersuites {
        None => tls13.extend(all.iter().filter(|s| s.version() == &rustls::version::TLS13).copied()),
        Some(list) => {
            for name in list.split([':', ',', ' ']).filter(|n| !n.is_empty()) {
                if let Some(&(_, suite)) = TLS13_NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    tls13.extend(pick(suite));
                } else if TLS13_UNSUPPORTED.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                    log::notice(format_args!(
                        "tls-ciphersuites: {name} is not supported by keylock's TLS library; ignored."
                    ));
                } else {
                    return Err(format!("Failed to configure ciphersuites: {list}"));
                }
            }
        }
    }
    let defaults12 = || all.iter().filter(|s| s.version() == &rustls::version::TLS12).copied();
    let mut tls12 = Vec::new();
    match ciphers {
        None => tls12.extend(defaults12()),
        Some(list) => {
            let mut ignored = Vec::new();
            for name in list.split([':', ',', ' ']).filter(|n| !n.is_empty()) {
                match TLS12_NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    Some(&(_, suite)) => tls12.extend(pick(suite)),
                    None => ignored.push(name),
                }
            }
            if !ignored.is_empty() {
                log::notice(format_args!(
                    "tls-ciphers: {} not mapped to a cipher of keylock's TLS library; ignored.",
                    ignored.join(":")
                ));
            }
            if tls12.is_empty() {
                log::notice(format_args!(
                    "tls-ciphers: no cipher named that keylock supports; using the TLSv1.2 defaults."
                ));
                tls12.extend(defaults12());
            }
        }
    }
    if ciphersuites.is_some() && tls13.is_empty() {
        return Err(format!("Failed to configure ciphersuites: {}", ciphersuites.unwrap_or_default()));
    }
    provider.cipher_suites = tls13.into_iter().chain(tls12).collect();
    Ok(provider)
}

fn io_text(e: &std::io::Error) -> String {
    crate::error::os_error_text(e)
}

fn pem_text(e: rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(e) => io_text(&e),
        other => format!("{other:?}"),
    }
}

/// A certificate chain from a PEM file, leaf first.
fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| io_text(&e))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_text)?;
    if certs.is_empty() {
        return Err("no certificate found in the file".into());
    }
    Ok(certs)
}

/// The private key from a PEM file (PKCS#8, PKCS#1 or SEC1), or an
/// encrypted PKCS#8 one (`ENCRYPTED PRIVATE KEY`, as OpenSSL 3 writes
/// with `openssl rsa|pkey -aes256`) decrypted with `pass`
/// (`tls-key-file-pass`).
fn load_key(path: &str, pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let pem = std::fs::read(path).map_err(|e| io_text(&e))?;
    if let Some(start) = memchr::memmem::find(&pem, b"-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        let Some(pass) = pass else {
            return Err("the key is encrypted and no tls-key-file-pass is set".into());
        };
        // The key's own block, whatever else the file holds.
        const END: &[u8] = b"-----END ENCRYPTED PRIVATE KEY-----";
        let end = memchr::memmem::find(&pem[start..], END).map_or(pem.len(), |e| start + e + END.len());
        let (_, der) = pkcs8::der::pem::decode_vec(&pem[start..end]).map_err(|e| e.to_string())?;
        let encrypted = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| e.to_string())?;
        let plain = encrypted
            .decrypt(pass)
            .map_err(|e| format!("could not decrypt the key with tls-key-file-pass ({e})"))?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    if memchr::memmem::find(&pem, b"ENCRYPTED").is_some() {
        // OpenSSL's older PEM encryption (`Proc-Type: 4,ENCRYPTED`).
        return Err(
            "keys encrypted in OpenSSL's traditional PEM format are not supported; convert it to PKCS#8 (openssl pkcs8 -topk8 -v2 aes256 -in KEY -out NEW)"
                .into(),
        );
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => "no private key found in the file".into(),
        e => pem_text(e),
    })
}

/// The CA certificates client certificates are checked against: every
/// certificate in `file`, and in every file of `dir` (OpenSSL looks
/// certificates up there by hashed names; keylock reads them all).
fn load_roots(file: Option<&str>, dir: Option<&str>) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(file) = file {
        for cert in load_certs(file).map_err(|e| format!("{file}: {e}"))? {
            roots.add(cert).map_err(|e| format!("{file}: {e}"))?;
        }
    }
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{dir}: {}", io_text(&e)))?;
        for entry in entries.flatten() {
            let Ok(pem) = std::fs::read(entry.path()) else { continue };
            for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
                let _ = roots.add(cert);
            }
        }
    }
    if roots.is_empty() {
        return Err("no CA certificate found".into());
    }
    Ok(roots)
}
