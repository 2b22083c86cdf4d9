//! TLS for the PostgreSQL store, by rustls (with the `ring` provider), under libpq's `sslmode`s:
//!
//! | sslmode | encrypted | server certificate checked |
//! |---|---|---|
//! | `disable` | no | - |
//! | `prefer` (default) | if the server offers it | no |
//! | `require` | yes | no (the chain, as `verify-ca`, when a CA file is given or `~/.postgresql/root.crt` exists) |
//! | `verify-ca` | yes | signed by the CA file |
//! | `verify-full` | yes | signed by the CA file and issued for the URL's host |
//!
//! The CA file is the URL's `sslrootcert=`, else `PGSSLROOTCERT`, else `~/.postgresql/root.crt`.
//! No channel binding is offered (SCRAM runs without `-PLUS`), as libpq does with
//! `channel_binding=prefer` against a client that cannot bind.

use crate::storage::pg_env::PgEnv;
use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use postgres::Socket;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    const NAMES: [(&'static str, SslMode); 5] = [
        ("disable", SslMode::Disable),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ];

    pub fn parse(s: &str) -> Result<SslMode, String> {
        Self::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, m)| *m)
            .ok_or_else(|| format!("sslmode `{s}`: expected disable, prefer, require, verify-ca or verify-full"))
    }

    /// The name libpq gives the mode.
    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, m)| *m == self).map_or("", |(n, _)| n)
    }

    /// What tokio-postgres is told: whether TLS is tried, and whether it is a must.
    fn client_mode(self) -> postgres::config::SslMode {
        match self {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => postgres::config::SslMode::Require,
        }
    }
}

/// The TLS keys of a URL, which this module reads instead of tokio-postgres (which knows
/// `sslmode` only up to `require` and no `sslrootcert`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsParams {
    pub sslmode: Option<String>,
    pub sslrootcert: Option<PathBuf>,
}

/// The URL without its `sslmode` and `sslrootcert` query keys, and their (percent-decoded) values.
pub fn split_tls_params(url: &str) -> (String, TlsParams) {
    let Some((base, query)) = url.split_once('?') else { return (url.to_string(), TlsParams::default()) };
    let mut params = TlsParams::default();
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = || percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned();
        match key {
            "sslmode" => params.sslmode = Some(decoded()),
            "sslrootcert" => params.sslrootcert = Some(PathBuf::from(decoded())),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    (url, params)
}

/// The TLS a connection uses: the mode in force and the CA file it checks against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsPlan {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
}

/// The mode (URL, else `PGSSLMODE`, else `prefer`) and CA file (URL, else `PGSSLROOTCERT`, else
/// `~/.postgresql/root.crt` when it exists). `require` with a CA file checks the chain, as libpq.
pub fn plan_tls(params: &TlsParams, env: &PgEnv) -> Result<TlsPlan, String> {
    let mode = match params.sslmode.as_deref().or(env.sslmode.as_deref()) {
        Some(s) => SslMode::parse(s)?,
        None => SslMode::Prefer,
    };
    let explicit = params.sslrootcert.clone().or_else(|| env.sslrootcert.clone());
    let root_cert = explicit.or_else(|| env.default_root_cert().filter(|p| p.is_file()));
    let mode = if mode == SslMode::Require && root_cert.is_some() { SslMode::VerifyCa } else { mode };
    match (mode, &root_cert) {
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => Err(format!(
            "sslmode={} needs the CA certificate that signed the server's: add sslrootcert=/path/to/ca.crt to the URL \
             (or set PGSSLROOTCERT, or put it in ~/.postgresql/root.crt)",
            mode.name()
        )),
        _ => Ok(TlsPlan { mode, root_cert }),
    }
}

/// The CA certificates of a PEM file.
fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("CA file {}: {e}", path.display()))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| format!("CA file {}: not a PEM certificate file ({e})", path.display()))?;
        roots.add(cert).map_err(|e| format!("CA file {}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("CA file {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it", path.display()));
    }
    Ok(roots)
}

/// The connector of a plan, for `postgres::Config::connect`, and the mode tokio-postgres gets.
pub fn connector(plan: &TlsPlan) -> Result<(MakeRustlsConnect, postgres::config::SslMode), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .dangerous();
    let verifier: Arc<dyn ServerCertVerifier> = match (plan.mode, &plan.root_cert) {
        (SslMode::VerifyCa | SslMode::VerifyFull, Some(path)) => {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(read_roots(path)?), provider)
                .build()
                .map_err(|e| format!("CA file {}: {e}", path.display()))?;
            if plan.mode == SslMode::VerifyFull {
                webpki
            } else {
                Arc::new(ChainOnly(webpki))
            }
        }
        _ => Arc::new(EncryptOnly(provider)),
    };
    let config = builder.with_custom_certificate_verifier(verifier).with_no_client_auth();
    Ok((MakeRustlsConnect { config: Arc::new(config), check_name: plan.mode == SslMode::VerifyFull }, plan.mode.client_mode()))
}

/// `prefer` and `require`: the handshake's signatures are checked (so the channel is encrypted
/// with the key of the certificate shown), the certificate itself is not.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to the CA file; the host name is not compared.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The chain is checked before the name, so a name error means the chain is good.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Makes a TLS connector per server host.
#[derive(Clone)]
pub struct MakeRustlsConnect {
    config: Arc<ClientConfig>,
    /// `verify-full`: the host must be a name (or address) the certificate can be checked against.
    check_name: bool,
}

impl MakeTlsConnect<Socket> for MakeRustlsConnect {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> io::Result<RustlsConnect> {
        let name = match ServerName::try_from(host.to_string()) {
            Ok(name) => name,
            Err(_) if self.check_name => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("sslmode=verify-full: `{host}` is not a host name or IP address to check the certificate against"),
                ))
            }
            // Unchecked names only serve as the TLS server name indication.
            Err(_) => ServerName::try_from("localhost").map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        };
        Ok(RustlsConnect { config: self.config.clone(), name })
    }
}

/// Connects one socket.
pub struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move { connector.connect(self.name, socket).await.map(RustlsStream) })
    }
}

/// An encrypted connection.
pub struct RustlsStream(tokio_rustls::client::TlsStream<Socket>);

impl AsyncRead for RustlsStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_keys_leave_the_url_and_others_stay() {
        let params =
            |mode: Option<&str>, root: Option<&str>| TlsParams { sslmode: mode.map(Into::into), sslrootcert: root.map(PathBuf::from) };
        let cases: &[(&str, &str, TlsParams)] = &[
            ("postgresql://u@h/db", "postgresql://u@h/db", params(None, None)),
            ("postgresql://u@h/db?sslmode=require", "postgresql://u@h/db", params(Some("require"), None)),
            (
                "postgresql://u@h/db?connect_timeout=3&sslmode=verify-full&sslrootcert=%2Ftmp%2Fmy%20ca.crt&application_name=x",
                "postgresql://u@h/db?connect_timeout=3&application_name=x",
                params(Some("verify-full"), Some("/tmp/my ca.crt")),
            ),
            ("postgresql://u@h/db?sslrootcert=ca.pem", "postgresql://u@h/db", params(None, Some("ca.pem"))),
        ];
        for (url, want_url, want) in cases {
            let (rest, got) = split_tls_params(url);
            assert_eq!((rest.as_str(), &got), (*want_url, want), "{url}");
        }
    }

    #[test]
    fn mode_and_ca_file_come_from_the_url_then_the_environment() {
        let dir = std::env::temp_dir().join(format!("mase-pgtls-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".postgresql")).unwrap();
        std::fs::write(dir.join(".postgresql/root.crt"), "").unwrap();
        let home = PgEnv { home: Some(dir.clone()), ..PgEnv::default() };
        let bare = PgEnv::default();
        let env_ca = PgEnv { sslmode: Some("verify-ca".into()), sslrootcert: Some("/env/ca.crt".into()), ..PgEnv::default() };
        let url = |mode: &str, root: Option<&str>| TlsParams { sslmode: Some(mode.into()), sslrootcert: root.map(PathBuf::from) };
        let plan = |mode, root: Option<PathBuf>| Ok(TlsPlan { mode, root_cert: root });
        let default_ca = Some(dir.join(".postgresql/root.crt"));
        let cases: Vec<(TlsParams, &PgEnv, Result<TlsPlan, &str>)> = vec![
            (TlsParams::default(), &bare, plan(SslMode::Prefer, None)),
            (url("disable", None), &env_ca, plan(SslMode::Disable, Some("/env/ca.crt".into()))),
            (url("require", None), &bare, plan(SslMode::Require, None)),
            // libpq: require with a CA file checks the chain.
            (url("require", Some("/url/ca.crt")), &bare, plan(SslMode::VerifyCa, Some("/url/ca.crt".into()))),
            (url("require", None), &home, plan(SslMode::VerifyCa, default_ca.clone())),
            (url("verify-full", None), &home, plan(SslMode::VerifyFull, default_ca)),
            (url("verify-full", Some("/url/ca.crt")), &env_ca, plan(SslMode::VerifyFull, Some("/url/ca.crt".into()))),
            (TlsParams::default(), &env_ca, plan(SslMode::VerifyCa, Some("/env/ca.crt".into()))),
            (url("verify-full", None), &bare, Err("sslmode=verify-full needs the CA certificate")),
            (url("verify-ca", None), &bare, Err("sslmode=verify-ca needs the CA certificate")),
            (url("allow", None), &bare, Err("sslmode `allow`: expected disable, prefer, require, verify-ca or verify-full")),
        ];
        for (params, env, want) in cases {
            match (plan_tls(&params, env), want) {
                (Ok(got), Ok(w)) => assert_eq!(got, w, "{params:?} {env:?}"),
                (Err(e), Err(words)) => assert!(e.contains(words), "{params:?}: {e}"),
                (got, w) => panic!("{params:?} {env:?}: got {got:?}, want {w:?}"),
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_ca_files_fail_with_one_line() {
        let dir = std::env::temp_dir().join(format!("mase-pgtls-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.crt");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let broken = dir.join("broken.crt");
        std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").unwrap();
        let cases: &[(PathBuf, &str)] =
            &[(dir.join("absent.crt"), "absent.crt: No such file"), (empty.clone(), "no PEM certificate"), (broken.clone(), "broken.crt")];
        for (path, words) in cases {
            let plan = TlsPlan { mode: SslMode::VerifyFull, root_cert: Some(path.clone()) };
            let e = connector(&plan).err().unwrap_or_else(|| panic!("{} should be refused", path.display()));
            assert!(e.contains(words) && !e.contains('\n'), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
