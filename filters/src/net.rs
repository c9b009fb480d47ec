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
        let addr = a.trim().parse::<IpAddr>().ok()?;
        // `::ffff:10.0.0.0/104` is an IPv4 network written as IPv6: keep it as IPv4.
        let (addr, p) = match (addr, addr.to_canonical(), p) {
            (IpAddr::V6(_), IpAddr::V4(v4), Some(p)) => {
                let bits = p
                    .trim()
                    .parse::<u8>()
                    .ok()
                    .filter(|b| (96..=128).contains(b))?;
                return Some(Cidr {
                    addr: IpAddr::V4(v4),
                    prefix: bits - 96,
                });
            }
            (_, canonical, p) => (canonical, p),
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p.trim().parse::<u8>().ok().filter(|p| *p <= max)?,
            None => max,
        };
        Some(Cidr { addr, prefix })
    }

    /// Whether `ip` is in the network; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a
    /// dual-stack socket reports for an IPv4 peer) matches as the IPv4 address it is.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
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
/// to the header is never believed). `forwarded_for` is every `X-Forwarded-For` line in the
/// order received: several lines are one list, as if joined with commas, so a client cannot
/// hide behind a second header line.
pub fn client_ip(peer: IpAddr, forwarded_for: &[&str], trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    let peer = peer.to_canonical();
    if !is_trusted(peer) {
        return peer;
    }
    let mut client = peer;
    for part in forwarded_for.iter().rev().flat_map(|line| line.rsplit(',')) {
        match part.trim().parse::<IpAddr>() {
            Ok(ip) => {
                client = ip.to_canonical();
                if !is_trusted(client) {
                    return client;
                }
            }
            // A garbled entry: stop believing the header here.
            Err(_) => return client,
        }
    }
    client
}

/// The identity a guest is counted under: an IPv4 address, or the /64 an IPv6 address is in
/// (one subscriber usually holds a whole /64, so counting single IPv6 addresses would hand
/// every guest 2^64 buckets).
pub fn guest_key(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let net = std::net::Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64));
            format!("{net}/64")
        }
    }
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
        assert_eq!(client_ip(ip("8.8.8.8"), &["1.1.1.1"], &t), ip("8.8.8.8"));
        // Trusted peer: the right-most untrusted entry.
        assert_eq!(
            client_ip(ip("10.0.0.1"), &["6.6.6.6, 5.5.5.5, 10.0.0.9"], &t),
            ip("5.5.5.5")
        );
        assert_eq!(client_ip(ip("10.0.0.1"), &[], &t), ip("10.0.0.1"));
        assert_eq!(client_ip(ip("10.0.0.1"), &["garbage"], &t), ip("10.0.0.1"));
        assert_eq!(
            client_ip(ip("::1"), &["2001:db8::7"], &t),
            ip("2001:db8::7")
        );
    }

    #[test]
    fn every_forwarded_for_line_counts_in_order() {
        let t = [Cidr::parse("10.0.0.0/8").unwrap()];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // The proxy appended the real client to the last line; a first line a client sent
        // does not win.
        assert_eq!(
            client_ip(ip("10.0.0.1"), &["6.6.6.6", "5.5.5.5, 10.0.0.9"], &t),
            ip("5.5.5.5")
        );
        assert_eq!(
            client_ip(ip("10.0.0.1"), &["6.6.6.6", "10.0.0.9"], &t),
            ip("6.6.6.6")
        );
    }

    #[test]
    fn ipv4_mapped_addresses_match_ipv4_networks() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let v4 = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(v4.contains(ip("::ffff:10.1.2.3")));
        assert!(!v4.contains(ip("::ffff:11.1.2.3")));
        let mapped = Cidr::parse("::ffff:10.0.0.0/104").unwrap();
        assert!(mapped.contains(ip("10.9.9.9")) && !mapped.contains(ip("11.0.0.1")));
        assert!(Cidr::parse("::ffff:10.0.0.0/90").is_none());
        // A mapped trusted peer is trusted, and the guest is reported as IPv4.
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.1"), &["::ffff:7.7.7.7"], &[v4]),
            ip("7.7.7.7")
        );
    }

    #[test]
    fn ipv6_guests_are_counted_by_their_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(guest_key(ip("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
        assert_eq!(
            guest_key(ip("2001:db8:1:2:ffff::9")),
            guest_key(ip("2001:db8:1:2::1"))
        );
        assert_ne!(
            guest_key(ip("2001:db8:1:3::1")),
            guest_key(ip("2001:db8:1:2::1"))
        );
        assert_eq!(guest_key(ip("9.9.9.9")), "9.9.9.9");
        assert_eq!(guest_key(ip("::ffff:9.9.9.9")), "9.9.9.9");
    }
}
