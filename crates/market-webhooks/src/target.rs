//! Which URLs a webhook may be delivered to. A service that POSTs to
//! operator-given URLs must not become a way into the network it runs in:
//! unless the operator allows private targets, a URL whose host is, or
//! resolves to, a loopback, private, link-local (cloud metadata at
//! 169.254.169.254), shared, multicast or otherwise non-public address is
//! refused when it is registered, and every connection is checked again at
//! delivery ([`PublicOnly`] resolves names; literal addresses are checked
//! before the request), so a name that later resolves inward is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

/// Whether private targets are allowed (`--allow-private-webhook-targets`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Allow loopback, private and link-local targets (tests, or a receiver
    /// on the operator's own network).
    pub allow_private: bool,
}

/// Why a URL is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not an absolute `http`/`https` URL with a host.
    #[error("{0}: give an absolute http:// or https:// URL with a host")]
    Malformed(String),
    /// The host is or resolves to an address that is not public.
    #[error("{url} resolves to {ip}, which is not a public address (loopback, private, link-local or metadata); pass --allow-private-webhook-targets to deliver there")]
    Private {
        /// The URL.
        url: String,
        /// The offending address.
        ip: IpAddr,
    },
    /// The host name did not resolve.
    #[error("{url}: its host does not resolve ({reason})")]
    Unresolved {
        /// The URL.
        url: String,
        /// The resolver's message.
        reason: String,
    },
}

/// Whether `ip` is a public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local (fd00:ec2::254 metadata)
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || s[0] == 0x2002 // 6to4: an IPv4 inside
                || (s[0] == 0x2001 && s[1] == 0) // Teredo: an IPv4 inside
                || (s[0..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0) // IPv4-translated
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64: an IPv4 inside
                || (s[0..6] == [0, 0, 0, 0, 0, 0])) // IPv4-compatible (deprecated)
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_unspecified()
        || a == 0 // "this network"
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16: cloud metadata
        || (a == 100 && (64..128).contains(&b)) // shared (100.100.100.200 metadata)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || ip.is_documentation()
        || ip.is_multicast()
        || a >= 240) // reserved, broadcast
}

/// Parses and checks a webhook URL's form and, for a literal address, the
/// address (a host name is checked by [`check_resolved`] or at delivery).
pub fn parse(url: &str, policy: TargetPolicy) -> Result<Url, TargetError> {
    let parsed = Url::parse(url).map_err(|_| TargetError::Malformed(url.to_owned()))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(TargetError::Malformed(url.to_owned()));
    }
    if !policy.allow_private {
        if let Some(ip) = literal_ip(&parsed) {
            if !is_public(ip) {
                return Err(TargetError::Private {
                    url: url.to_owned(),
                    ip,
                });
            }
        }
    }
    Ok(parsed)
}

/// The host of `url` when it is a literal address.
fn literal_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

/// [`parse`], then resolves a host name (blocking) and refuses it if any of
/// its addresses is not public: what `webhook create` runs.
pub fn check_resolved(url: &str, policy: TargetPolicy) -> Result<Url, TargetError> {
    let parsed = parse(url, policy)?;
    if policy.allow_private || literal_ip(&parsed).is_some() {
        return Ok(parsed);
    }
    let host = parsed.host_str().unwrap_or_default().to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addrs = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| TargetError::Unresolved {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
    for a in addrs {
        if !is_public(a.ip()) {
            return Err(TargetError::Private {
                url: url.to_owned(),
                ip: a.ip(),
            });
        }
    }
    Ok(parsed)
}

/// A resolver for the delivery client that drops non-public addresses and
/// fails a name that has no public one, so that the connection itself
/// cannot reach inward whatever the name resolves to at that moment.
#[derive(Debug, Default)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> =
                all.iter().copied().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                let ip = all
                    .first()
                    .map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |a| a.ip());
                return Err(format!(
                    "{host} resolves to {ip}, which is not a public address (the server refuses private webhook targets unless started with --allow-private-webhook-targets)"
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> bool {
        matches!(
            parse(url, TargetPolicy::default()),
            Err(TargetError::Private { .. })
        )
    }

    #[test]
    fn inward_literals_are_refused() {
        for url in [
            "http://127.0.0.1/",
            "http://127.1.2.3:8080/hook",
            "http://10.0.0.1/",
            "http://172.16.5.4/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://100.100.100.200/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[fe80::1]/",
            "http://[fd00:ec2::254]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://[fec0::1]/",
            "http://[2002:7f00:1::1]/",
            "http://[2001:0:4136:e378::1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
        ] {
            assert!(refused(url), "{url} should be refused");
        }
    }

    #[test]
    fn public_literals_and_names_pass_the_form_check() {
        for url in [
            "https://8.8.8.8/hook",
            "http://[2606:4700::1111]/",
            "https://hooks.example.com/x?y=1",
        ] {
            assert!(parse(url, TargetPolicy::default()).is_ok(), "{url}");
        }
    }

    #[test]
    fn malformed_urls_are_refused() {
        for url in [
            "ftp://example.com/",
            "example.com/hook",
            "http://",
            "mailto:a@b",
        ] {
            assert!(
                matches!(
                    parse(url, TargetPolicy::default()),
                    Err(TargetError::Malformed(_))
                ),
                "{url}"
            );
        }
    }

    #[test]
    fn allowing_private_targets_allows_them() {
        let allow = TargetPolicy {
            allow_private: true,
        };
        assert!(parse("http://127.0.0.1:9000/", allow).is_ok());
        assert!(check_resolved("http://localhost:9000/", allow).is_ok());
    }

    #[test]
    fn names_resolving_inward_are_refused() {
        assert!(matches!(
            check_resolved("http://localhost:9000/", TargetPolicy::default()),
            Err(TargetError::Private { .. })
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_delivery_resolver_refuses_inward_names() {
        let err = PublicOnly
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .expect("localhost is refused");
        assert!(err.to_string().contains("not a public address"), "{err}");
    }
}
