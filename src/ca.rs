//! CA certificates from a PEM file, the one loader of trust roots: the HTTPS client of push
//! (`--push.ca-file`) and `top` (`--url.ca-file`), and the web config's `client_ca_file` (the
//! CAs that client certificates must chain to).

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;

/// The certificates of the PEM file at `path` as trust roots, read with [`crate::optfile`]'s
/// bounds. `name` (an option or config key) starts every message.
///
/// # Errors
/// `"{name} {path}: …"`: the file cannot be read, a PEM block is malformed or not a usable
/// certificate, or the file holds no certificate.
pub fn roots(path: &Path, name: &str) -> Result<rustls::RootCertStore, String> {
    let name = format!("{name} {}", path.display());
    let pem = crate::optfile::read(path, crate::optfile::Kind::Pem)
        .map_err(|e| format!("{name}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| format!("{name}: {e}"))?;
        roots.add(c).map_err(|e| format!("{name}: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("{name}: no certificate"));
    }
    Ok(roots)
}

/// TLS client settings that trust the CA certificates of a PEM file (`--push.ca-file`, and
/// `top --url.ca-file`, named in errors by `option`).
///
/// # Errors
/// A message naming the option and file (see [`roots`]).
pub fn client_tls(path: &Path, option: &str) -> Result<rustls::ClientConfig, String> {
    let roots = roots(path, option)?;
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file without a certificate is refused by name, whoever reads it: the web config's
    /// client CA used to get rustls's "no root anchors" instead of push's message.
    #[test]
    fn a_file_without_a_certificate_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a PEM file\n").unwrap();
        let shown = empty.display();
        assert_eq!(
            roots(&empty, "client_ca_file").unwrap_err(),
            format!("client_ca_file {shown}: no certificate")
        );
        assert_eq!(
            client_tls(&empty, "--push.ca-file").unwrap_err(),
            format!("--push.ca-file {shown}: no certificate")
        );
        let bad = dir.path().join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = roots(&bad, "--url.ca-file").unwrap_err();
        assert!(
            e.starts_with(&format!("--url.ca-file {}: ", bad.display())) && e.len() > 20,
            "{e}"
        );
        let missing = dir.path().join("missing.pem");
        let e = roots(&missing, "--url.ca-file").unwrap_err();
        assert!(
            e.starts_with(&format!("--url.ca-file {}: ", missing.display())),
            "{e}"
        );
    }
}
