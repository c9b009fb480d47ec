//! Client addresses: IP networks from the config (`trusted_proxies`) and the client IP of a
//! request, which identifies a guest for rate limiting.

use std::net::IpAddr;

/// An IP network from `a.b.c.d/n`, `::1/128` or a bare address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Option<Cidr> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p.trim().parse::<u8>().ok().filter(|p| *p <= max)?,
            None => max,
        };
        Some(Cidr { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.prefix)
                };
                u32::from(n) & mask == u32::from(i) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.prefix)
                };
                u128::from(n) & mask == u128::from(i) & mask
            }
            _ => false,
        }
    }
}

/// The client of a request: the peer, unless the peer is a trusted proxy, in which case the
/// right-most address of `X-Forwarded-For` that is not itself trusted (what a client prepends
/// to the header is never believed).
pub fn client_ip(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let Some(xff) = forwarded_for else {
        return peer;
    };
    let mut client = peer;
    for part in xff.rsplit(',') {
        match part.trim().parse::<IpAddr>() {
            Ok(ip) => {
                client = ip;
                if !is_trusted(ip) {
                    return ip;
                }
            }
            // A garbled entry: stop believing the header here.
            Err(_) => return client,
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_and_forwarded_for() {
        let t = [
            Cidr::parse("10.0.0.0/8").unwrap(),
            Cidr::parse("::1").unwrap(),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(t[0].contains(ip("10.2.3.4")) && !t[0].contains(ip("11.0.0.1")));
        assert!(Cidr::parse("1.2.3.4/33").is_none() && Cidr::parse("nope").is_none());
        // Untrusted peer: the header is ignored.
        assert_eq!(client_ip(ip("8.8.8.8"), Some("1.1.1.1"), &t), ip("8.8.8.8"));
        // Trusted peer: the right-most untrusted entry.
        assert_eq!(
            client_ip(ip("10.0.0.1"), Some("6.6.6.6, 5.5.5.5, 10.0.0.9"), &t),
            ip("5.5.5.5")
        );
        assert_eq!(client_ip(ip("10.0.0.1"), None, &t), ip("10.0.0.1"));
        assert_eq!(
            client_ip(ip("10.0.0.1"), Some("garbage"), &t),
            ip("10.0.0.1")
        );
        assert_eq!(
            client_ip(ip("::1"), Some("2001:db8::7"), &t),
            ip("2001:db8::7")
        );
    }
}
