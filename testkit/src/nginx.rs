//! nginx as a real TLS terminator in front of a fake provider, and a private PKI made by the
//! `openssl` command at test time: what the gateway's TLS to providers is tested against
//! (`tests/upstream_tls.rs`). Neither is a mock: rustls meets nginx's OpenSSL, and every
//! certificate is one OpenSSL issued. nginx also serves plain HTTP from server blocks a test
//! writes ([`Nginx::plain`]): a real HTTP/1.1 server's keep-alive, chunking and closes for the
//! gateway's upstream client (`tests/upstream_nginx.rs`).
//!
//! nginx runs as one process of the test's own (`master_process off`, `daemon off`), with its
//! prefix, config, logs and temporary files in a directory of its own: nothing under
//! /etc/nginx or /var/log/nginx is read or written. `./dev test` installs Debian's nginx.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The nginx binary: on `PATH`, else Debian's `/usr/sbin` (not on a non-root user's `PATH`).
pub fn nginx_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join("nginx"))
        .find(|b| {
            Command::new(b)
                .arg("-v")
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// Why the TLS tests cannot run here (no nginx, no openssl), for [`crate::skip`].
pub fn missing() -> Option<String> {
    if nginx_bin().is_none() {
        return Some("nginx is not installed (./dev test installs Debian's nginx-light)".into());
    }
    let openssl = Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .status();
    if !openssl.is_ok_and(|s| s.success()) {
        return Some("the openssl command is not installed".into());
    }
    None
}

/// A private PKI in a temporary directory: a CA the gateway is told to trust, another it is
/// not, a client CA for nginx to require, and the certificates below (each `<name>.pem` with
/// its key `<name>.key`).
pub struct Pki {
    pub dir: PathBuf,
}

/// The server and client certificates a [`Pki`] issues.
pub mod cert {
    /// `localhost`, issued by the trusted CA (`ca.pem`), valid now.
    pub const GOOD: &str = "good";
    /// `wrong.example` only, issued by the trusted CA.
    pub const WRONG_NAME: &str = "wrong-name";
    /// `localhost`, issued by the trusted CA, valid only on 1-2 January 2020.
    pub const EXPIRED: &str = "expired";
    /// `localhost`, issued by another CA (`rogue-ca.pem`) the gateway is not told of.
    pub const UNTRUSTED: &str = "untrusted";
    /// A client certificate issued by the client CA (`client-ca.pem`).
    pub const CLIENT: &str = "client";
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("openssl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Pki {
    /// Makes every CA and certificate (P-256 keys, a second or so in all).
    pub fn make() -> Result<Pki, String> {
        let pki = Pki {
            dir: crate::gateway::temp_dir(),
        };
        for ca in ["ca", "rogue-ca", "client-ca"] {
            pki.ca(ca)?;
        }
        pki.issue(cert::GOOD, "ca", "DNS:localhost", "serverAuth", None)?;
        pki.issue(
            cert::WRONG_NAME,
            "ca",
            "DNS:wrong.example",
            "serverAuth",
            None,
        )?;
        pki.issue(
            cert::EXPIRED,
            "ca",
            "DNS:localhost",
            "serverAuth",
            Some(("20200101000000Z", "20200102000000Z")),
        )?;
        pki.issue(
            cert::UNTRUSTED,
            "rogue-ca",
            "DNS:localhost",
            "serverAuth",
            None,
        )?;
        pki.issue(
            cert::CLIENT,
            "client-ca",
            "DNS:tollgate.client",
            "clientAuth",
            None,
        )?;
        Ok(pki)
    }

    /// The path of a file of the PKI (`ca.pem`, `good.key`, ...), as config text.
    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    fn ca(&self, name: &str) -> Result<(), String> {
        let (key, pem, subj) = (
            format!("{name}.key"),
            format!("{name}.pem"),
            format!("/CN=Tollgate test {name}"),
        );
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &pem,
                "-days",
                "3",
                "-subj",
                &subj,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        )?;
        // `openssl ca` (the one command of OpenSSL 3.0 that sets any validity period, the
        // expired certificate's) keeps a database per CA.
        std::fs::write(self.dir.join(format!("{name}.index")), "").map_err(|e| e.to_string())?;
        std::fs::write(self.dir.join(format!("{name}.serial")), "01\n").map_err(|e| e.to_string())
    }

    /// A certificate `name` for `san`, issued by CA `ca`, valid for two days from now or over
    /// `dates` (start, end as `YYYYMMDDHHMMSSZ`).
    fn issue(
        &self,
        name: &str,
        ca: &str,
        san: &str,
        usage: &str,
        dates: Option<(&str, &str)>,
    ) -> Result<(), String> {
        let d = self.dir.display();
        let cnf = format!(
            "[ca]\ndefault_ca = this\n[this]\ndatabase = {d}/{ca}.index\nnew_certs_dir = {d}\nserial = {d}/{ca}.serial\ndefault_md = sha256\ndefault_days = 2\npolicy = any\nunique_subject = no\n[any]\ncommonName = supplied\n"
        );
        let ext = format!(
            "subjectAltName = {san}\nbasicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\nextendedKeyUsage = {usage}\n"
        );
        let (cnf_file, ext_file) = (format!("{name}.cnf"), format!("{name}.ext"));
        std::fs::write(self.dir.join(&cnf_file), cnf).map_err(|e| e.to_string())?;
        std::fs::write(self.dir.join(&ext_file), ext).map_err(|e| e.to_string())?;
        let (key, csr, pem) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
        );
        let cn = format!("/CN={}", san.trim_start_matches("DNS:"));
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &cn,
            ],
        )?;
        let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
        let mut args = vec![
            "ca", "-batch", "-notext", "-config", &cnf_file, "-cert", &ca_pem, "-keyfile", &ca_key,
            "-in", &csr, "-out", &pem, "-extfile", &ext_file,
        ];
        if let Some((start, end)) = dates {
            args.extend(["-startdate", start, "-enddate", end]);
        }
        openssl(&self.dir, &args)
    }
}

/// How an [`Nginx`] serves TLS.
pub struct Site<'a> {
    /// Where it listens (`127.0.0.1:443` for the scheme's own port).
    pub listen: SocketAddr,
    /// The certificate it presents: one of [`cert`].
    pub cert: &'a str,
    /// Require a client certificate issued by this CA file (`ssl_verify_client on`).
    pub client_ca: Option<String>,
    /// Where it proxies every request (plain HTTP): the fake provider.
    pub upstream: SocketAddr,
}

/// A running nginx; killed when dropped.
pub struct Nginx {
    child: Child,
    pub dir: PathBuf,
    pub addr: SocketAddr,
}

impl Nginx {
    /// Starts nginx on `site` and waits until it accepts connections.
    pub async fn start(pki: &Pki, site: &Site<'_>) -> Result<Nginx, String> {
        let client = match &site.client_ca {
            Some(ca) => format!("ssl_client_certificate {ca};\n    ssl_verify_client on;"),
            None => String::new(),
        };
        let http = format!(
            "  access_log {{dir}}/access.log;
  server {{
    listen {listen} ssl;
    server_name localhost;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    {client}
    location / {{
      proxy_pass http://{upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_set_header Host $http_host;
      proxy_buffering off;
    }}
  }}
",
            listen = site.listen,
            cert = pki.path(&format!("{}.pem", site.cert)),
            key = pki.path(&format!("{}.key", site.cert)),
            upstream = site.upstream,
        );
        Self::launch(&http, site.listen).await
    }

    /// Starts nginx serving plain HTTP with `servers` (`server { ... }` blocks, each listening
    /// where it says) and waits until `addr` accepts connections. Its access log has one line
    /// per request: `$server_port $connection $connection_requests $request_method
    /// $request_uri $status`, so a test sees which connection carried each request and how
    /// many it had carried.
    pub async fn plain(addr: SocketAddr, servers: &str) -> Result<Nginx, String> {
        let http = format!(
            "  log_format reuse '$server_port $connection $connection_requests $request_method $request_uri $status';
  access_log {{dir}}/access.log reuse;
{servers}
"
        );
        Self::launch(&http, addr).await
    }

    /// Runs nginx with `http` inside its `http` block (`{dir}` there is its own directory).
    async fn launch(http: &str, addr: SocketAddr) -> Result<Nginx, String> {
        let bin = nginx_bin().ok_or("nginx is not installed")?;
        let dir = crate::gateway::temp_dir();
        std::fs::create_dir_all(dir.join("tmp")).map_err(|e| e.to_string())?;
        let d = dir.display();
        // As root, nginx would switch to `nobody`, who cannot write the temporary directory.
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
        let user = if is_root { "user root;" } else { "" };
        let http = http.replace("{dir}", &d.to_string());
        let conf = format!(
            "{user}
worker_processes 1;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
{http}}}
"
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let global = format!("daemon off; master_process off; pid {d}/nginx.pid;");
        let child = Command::new(bin)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&conf_path)
            .args(["-g", &global])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start nginx: {e}"))?;
        let mut n = Nginx { child, dir, addr };
        let start = Instant::now();
        loop {
            if tokio::net::TcpStream::connect(n.addr).await.is_ok() {
                return Ok(n);
            }
            if let Ok(Some(status)) = n.child.try_wait() {
                return Err(format!("nginx exited with {status}: {}", n.error_log()));
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(format!("nginx did not listen: {}", n.error_log()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The access log: one line per HTTP request nginx read (none for a refused handshake).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }

    /// HTTP requests nginx has logged so far.
    pub fn requests(&self) -> usize {
        self.access_log().lines().count()
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // One process (`master_process off`): killing it leaves no worker behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
