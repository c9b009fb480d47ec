//! `[[providers]]`' TLS material: `ca_file`, `client_cert_file` and `client_key_file`, read
//! and checked once at config load (and on each reload) as Pingora's rustls connector will use
//! them.

use std::sync::Arc;

use pingora::protocols::tls::CaType;
use pingora::utils::tls::{parse_x509, CertKey, WrappedX509};

use super::error::{err, ConfigError};

/// A provider's TLS material, parsed once at config load (and on each reload): a request's peer
/// and the health check's clone the `Arc`s, so no request reads or parses a file.
#[derive(Clone, Default)]
pub struct ProviderTls {
    /// `ca_file`'s certificates. Pingora's rustls connector verifies a peer that carries a CA
    /// list against that list alone (a root store made of it, not added to the system's), so
    /// these replace the system roots for this provider.
    pub ca: Option<Arc<CaType>>,
    /// `client_cert_file` with `client_key_file`, presented when the server asks for one.
    pub client_cert_key: Option<Arc<CertKey>>,
}

impl std::fmt::Debug for ProviderTls {
    // Counts and names only: a derived `Debug` would print every certificate's fields.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderTls")
            .field("ca_certs", &self.ca.as_ref().map(|c| c.len()))
            .field(
                "client_cert",
                &self.client_cert_key.as_ref().map(|c| c.to_string()),
            )
            .finish()
    }
}

/// One PEM block: its label (`CERTIFICATE`, `PRIVATE KEY`, ...) and its DER bytes.
struct PemBlock {
    label: &'static str,
    der: Vec<u8>,
}

/// The PEM blocks of the file at `path`, read by rustls' own PEM reader (text outside blocks
/// is ignored, as OpenSSL does: bundles carry comments). An encrypted key is refused by name:
/// the reader would skip it and the error would only say that no key was found.
fn read_pem(path: &str) -> Result<Vec<PemBlock>, String> {
    use rustls_pemfile::Item;
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
    if text.contains("ENCRYPTED") {
        return Err(format!(
            "`{path}`: the key is encrypted; the gateway needs it unencrypted"
        ));
    }
    let mut blocks = Vec::new();
    for item in rustls_pemfile::read_all(&mut text.as_bytes()) {
        let (label, der) = match item.map_err(|e| format!("`{path}` is not valid PEM: {e}"))? {
            Item::X509Certificate(c) => ("CERTIFICATE", c.to_vec()),
            Item::Pkcs8Key(k) => ("PRIVATE KEY", k.secret_pkcs8_der().to_vec()),
            Item::Pkcs1Key(k) => ("RSA PRIVATE KEY", k.secret_pkcs1_der().to_vec()),
            Item::Sec1Key(k) => ("EC PRIVATE KEY", k.secret_sec1_der().to_vec()),
            _ => ("another kind of", Vec::new()),
        };
        blocks.push(PemBlock { label, der });
    }
    Ok(blocks)
}

/// A certificate's DER checked the way Pingora will use it: rustls adds it to a root store
/// (per connection, returning an error) and x509-parser reads it into a `WrappedX509` (which
/// panics on a certificate it cannot parse, so that parse is tried here, once, at load).
fn wrap_cert(der: Vec<u8>, what: &str) -> Result<WrappedX509, String> {
    pingora::tls::RootCertStore::empty()
        .add(pingora::tls::CertificateDer::from(der.clone()))
        .map_err(|e| format!("{what} is not a usable X.509 certificate: {e}"))?;
    std::panic::catch_unwind(move || WrappedX509::new(der, parse_x509))
        .map_err(|_| format!("{what} is not a parsable X.509 certificate"))
}

/// `ca_file`: one or more CA certificates, nothing else.
fn load_ca(path: &str) -> Result<Arc<CaType>, String> {
    let mut certs = Vec::new();
    for (n, b) in read_pem(path)?.into_iter().enumerate() {
        if b.label != "CERTIFICATE" {
            return Err(format!(
                "`{path}` holds a {} block; a CA file holds certificates only",
                b.label
            ));
        }
        certs.push(wrap_cert(b.der, &format!("`{path}`: block {}", n + 1))?);
    }
    if certs.is_empty() {
        return Err(format!("`{path}` holds no PEM certificate"));
    }
    Ok(Arc::from(certs))
}

/// `client_cert_file` and `client_key_file`: the chain (leaf first) and its unencrypted key,
/// checked as Pingora's connector will use them (rustls builds a client config from them on
/// each new connection, and Pingora unwraps the key's conversion there).
fn load_client_cert(cert_path: &str, key_path: &str) -> Result<Arc<CertKey>, String> {
    use pingora::tls::{version, ClientConfig, PrivateKeyDer, RootCertStore};
    let mut ders = Vec::new();
    for (n, b) in read_pem(cert_path)?.into_iter().enumerate() {
        // A combined file (certificate and key in one) is common: its key block is skipped.
        if b.label == "CERTIFICATE" {
            wrap_cert(b.der.clone(), &format!("`{cert_path}`: block {}", n + 1))?;
            ders.push(b.der);
        }
    }
    if ders.is_empty() {
        return Err(format!("`{cert_path}` holds no PEM certificate"));
    }
    let key = read_pem(key_path)?
        .into_iter()
        .find(|b| b.label.ends_with("PRIVATE KEY"))
        .ok_or_else(|| format!("`{key_path}` holds no PEM private key"))?;
    let parsed = PrivateKeyDer::try_from(key.der.clone())
        .map_err(|e| format!("`{key_path}`: not a PKCS#8, PKCS#1 or SEC1 key: {e}"))?;
    pingora::tls::install_default_crypto_provider();
    let chain = ders
        .iter()
        .map(|d| pingora::tls::CertificateDer::from(d.clone()))
        .collect();
    ClientConfig::builder_with_protocol_versions(&[&version::TLS12, &version::TLS13])
        .with_root_certificates(RootCertStore::empty())
        .with_client_auth_cert(chain, parsed)
        .map_err(|e| format!("`{cert_path}` with `{key_path}` cannot be used: {e}"))?;
    // Built only now that every certificate parsed (`CertKey::new` panics on one that does not).
    Ok(Arc::new(CertKey::new(ders, key.der)))
}

/// A provider's TLS keys as written: the paths of its files.
pub(super) struct TlsFiles<'a> {
    pub ca_file: Option<&'a String>,
    pub client_cert_file: Option<&'a String>,
    pub client_key_file: Option<&'a String>,
}

/// A provider's TLS keys (`at` names a key's path): their files read and parsed. On a provider
/// with endpoints but no `https://` one (`plain_only`) they would do nothing, which is refused
/// rather than ignored: the operator meant the provider to be verified or authenticated.
pub(super) fn tls_of(
    p: TlsFiles<'_>,
    plain_only: bool,
    at: &dyn Fn(&str) -> String,
    errs: &mut Vec<ConfigError>,
) -> ProviderTls {
    let mut tls = ProviderTls::default();
    let any_set =
        p.ca_file.is_some() || p.client_cert_file.is_some() || p.client_key_file.is_some();
    if any_set && plain_only {
        let key = if p.ca_file.is_some() {
            "ca_file"
        } else {
            "client_cert_file"
        };
        errs.push(err(
            at(key),
            "applies to https:// endpoints only, and this provider has none",
        ));
        return tls;
    }
    if let Some(path) = p.ca_file {
        match load_ca(path) {
            Ok(ca) => tls.ca = Some(ca),
            Err(m) => errs.push(err(at("ca_file"), m)),
        }
    }
    match (p.client_cert_file, p.client_key_file) {
        (Some(cert), Some(key)) => match load_client_cert(cert, key) {
            Ok(ck) => tls.client_cert_key = Some(ck),
            Err(m) => errs.push(err(at("client_cert_file"), m)),
        },
        (Some(_), None) => errs.push(err(
            at("client_key_file"),
            "must be set with client_cert_file",
        )),
        (None, Some(_)) => errs.push(err(
            at("client_cert_file"),
            "must be set with client_key_file",
        )),
        (None, None) => {}
    }
    tls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_files_that_hold_no_usable_block_are_refused_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("tollgate-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        };
        let cases = [
            ("empty.pem", "# nothing here\n", "holds no PEM certificate"),
            (
                "open.pem",
                "-----BEGIN CERTIFICATE-----\nAAAA\n",
                "not valid PEM",
            ),
            (
                "b64.pem",
                "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
                "not valid PEM",
            ),
            (
                "junk.pem",
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                "not a usable X.509 certificate",
            ),
            (
                "key.pem",
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                "holds a PRIVATE KEY block",
            ),
        ];
        for (name, text, expected) in cases {
            let e = load_ca(&file(name, text)).map(|_| ()).unwrap_err();
            assert!(e.contains(expected), "{name}: {e}");
        }
        let key = file(
            "enc.key",
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nAAAA\n-----END RSA PRIVATE KEY-----\n",
        );
        assert!(read_pem(&key)
            .map(|_| ())
            .unwrap_err()
            .contains("encrypted"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
