//! Vocabularies for labels, tags and key-opinion-leader identities.
//!
//! Entity names are trading firms and funds as they commonly appear in
//! public wallet-labelling tools; people (KOLs) are fictional.

use rand_chacha::ChaCha8Rng;

use crate::num::{pick_weighted, unit};

/// The fixed tag vocabulary.
pub(crate) const TAGS: &[&str] = &[
    "smart-money",
    "market-maker",
    "fund",
    "kol",
    "insider",
    "degen",
    "hedger",
    "bot",
    "arbitrageur",
    "early-adopter",
    "copy-trader",
    "liquidation-hunter",
];

/// Relative frequency of each tag in [`TAGS`] for ordinary wallets (`kol` is given to KOLs only).
const TAG_WEIGHTS: &[f64] = &[14.0, 3.0, 4.0, 0.0, 2.0, 14.0, 7.0, 9.0, 5.0, 7.0, 5.0, 3.0];

/// Trading firms and funds labelled on large wallets, with their tags.
pub(crate) const ENTITIES: &[(&str, &[&str])] = &[
    ("Wintermute", &["market-maker", "smart-money"]),
    ("Abraxas Capital", &["fund", "hedger"]),
    ("Jump Trading", &["market-maker"]),
    ("GSR Markets", &["market-maker"]),
    ("Amber Group", &["market-maker", "fund"]),
    ("Cumberland DRW", &["market-maker"]),
    ("Galaxy Digital", &["fund", "smart-money"]),
    ("Flow Traders", &["market-maker", "arbitrageur"]),
    ("DWF Labs", &["market-maker"]),
    ("Selini Capital", &["market-maker", "bot"]),
    ("Auros", &["market-maker", "bot"]),
    ("Keyrock", &["market-maker"]),
    ("Presto Labs", &["market-maker", "bot"]),
    ("QCP Capital", &["fund", "hedger"]),
    ("Arrington Capital", &["fund"]),
    ("Multicoin Capital", &["fund", "smart-money"]),
    ("Polychain Capital", &["fund"]),
    ("Pantera Capital", &["fund"]),
    ("Dragonfly", &["fund", "smart-money"]),
    ("Framework Ventures", &["fund"]),
    ("Delphi Digital", &["fund", "smart-money"]),
    ("Laser Digital", &["fund", "hedger"]),
    ("Fasanara Capital", &["fund", "hedger"]),
    ("Maelstrom", &["fund", "smart-money"]),
    ("Arca", &["fund"]),
    ("Hashed", &["fund"]),
    ("Spartan Group", &["fund"]),
    ("Bitwise", &["fund", "hedger"]),
    ("Caladan", &["market-maker", "arbitrageur"]),
    ("Kronos Research", &["market-maker", "bot"]),
];

const HANDLE_PREFIXES: &[&str] = &[
    "Hyper",
    "Funding",
    "Basis",
    "Delta",
    "Gamma",
    "Perp",
    "Onchain",
    "Night",
    "Alpha",
    "Whale",
    "Liquid",
    "Macro",
    "Swing",
    "Grid",
    "Momentum",
    "Mean",
    "Vol",
    "Short",
    "Long",
    "Contrarian",
];
const HANDLE_SUFFIXES: &[&str] = &[
    "Scalper", "Farmer", "Trader", "Hunter", "Sniper", "Desk", "Fund", "Maxi", "Degen", "Watcher",
    "Reverter", "Seller", "Bull", "Bear", "Capital", "Labs",
];
const BOT_NAMES: &[&str] = &[
    "Grid Bot",
    "TWAP Bot",
    "Arb Bot",
    "Funding Arb",
    "Copy-trade Vault",
    "MM Vault",
    "Basis Vault",
];
const MAXI_COINS: &[&str] = &["BTC", "ETH", "SOL", "HYPE", "DOGE", "XRP", "LINK"];

/// A plausible public label for a wallet that is not a known entity.
pub(crate) fn generic_label(rng: &mut ChaCha8Rng, address: &str, whale: bool) -> String {
    let r = unit(rng);
    if whale && r < 0.6 || r < 0.15 {
        format!("whale {}…", &address[..6])
    } else if r < 0.45 {
        let p = HANDLE_PREFIXES[(unit(rng) * HANDLE_PREFIXES.len() as f64) as usize];
        let s = HANDLE_SUFFIXES[(unit(rng) * HANDLE_SUFFIXES.len() as f64) as usize];
        format!("{p}{s}")
    } else if r < 0.65 {
        let b = BOT_NAMES[(unit(rng) * BOT_NAMES.len() as f64) as usize];
        format!("{b} #{}", 1 + (unit(rng) * 40.0) as u32)
    } else if r < 0.8 {
        let c = MAXI_COINS[(unit(rng) * MAXI_COINS.len() as f64) as usize];
        format!("{c} maxi")
    } else {
        format!("0x{} deployer", &address[2..8])
    }
}

/// 1 to 3 distinct tags from [`TAGS`] (never `kol`), in vocabulary order.
pub(crate) fn random_tags(rng: &mut ChaCha8Rng, big: bool) -> Vec<String> {
    let n = 1 + pick_weighted(rng, &[65.0, 27.0, 8.0]);
    let mut weights = TAG_WEIGHTS.to_vec();
    if big {
        weights[0] *= 2.5; // smart-money
        weights[2] *= 3.0; // fund
        weights[6] *= 2.0; // hedger
        weights[5] *= 0.3; // degen
    }
    let mut chosen = vec![false; TAGS.len()];
    for _ in 0..n {
        let i = pick_weighted(rng, &weights);
        chosen[i] = true;
        weights[i] = 0.0;
    }
    TAGS.iter()
        .zip(chosen)
        .filter(|(_, c)| *c)
        .map(|(t, _)| (*t).to_owned())
        .collect()
}

const KOL_FIRST: &[&str] = &[
    "Crypto", "Degen", "Alpha", "Moon", "Chart", "Perp", "Based", "Onchain", "Macro", "Liquid",
    "Funding", "Delta", "Satoshi", "Candle", "Whale", "Leverage", "Ape", "Hyper",
];
const KOL_SECOND: &[&str] = &[
    "Sensei",
    "Wizard",
    "Whisperer",
    "Hunter",
    "Monk",
    "Cowboy",
    "Oracle",
    "Pilot",
    "Sage",
    "Ninja",
    "Queen",
    "Baron",
    "Nomad",
    "Chef",
    "Samurai",
    "Viking",
];
const BIOS: &[&str] = &[
    "Perp trader. Charts, memes and the occasional good call. Not financial advice.",
    "Onchain since 2017. Posting every entry and exit.",
    "Full-time degen, part-time analyst.",
    "Macro views, crypto execution.",
    "I trade the funding rate so you don't have to.",
    "Building in public, trading in private (until now).",
    "Ex-TradFi. Leverage responsibly.",
    "Swing setups on majors, weekly livestreams.",
];

/// A fictional KOL: display name, linked identities and follower count.
pub(crate) struct KolIdentity {
    /// Display name.
    pub name: String,
    /// `(platform, handle)` pairs; `x` always first.
    pub accounts: Vec<(&'static str, String)>,
    /// Short biography, if any.
    pub bio: Option<String>,
    /// Followers over all accounts.
    pub followers: u64,
}

/// Draws a KOL identity; `taken` counts names already used so names stay unique.
pub(crate) fn kol_identity(
    rng: &mut ChaCha8Rng,
    taken: &mut std::collections::BTreeSet<String>,
) -> KolIdentity {
    let first = KOL_FIRST[(unit(rng) * KOL_FIRST.len() as f64) as usize];
    let second = KOL_SECOND[(unit(rng) * KOL_SECOND.len() as f64) as usize];
    let base = format!("{first} {second}");
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base} {n}");
        n += 1;
    }
    taken.insert(name.clone());
    let slug: String = name.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let mut accounts = vec![("x", format!("@{slug}"))];
    if unit(rng) < 0.35 {
        accounts.push(("telegram", format!("@{}", slug.to_lowercase())));
    }
    if unit(rng) < 0.15 {
        accounts.push(("youtube", format!("@{slug}")));
    }
    let bio = (unit(rng) < 0.75).then(|| BIOS[(unit(rng) * BIOS.len() as f64) as usize].to_owned());
    let followers = (crate::num::pareto(rng, 4_000.0, 0.9).min(3_000_000.0)) as u64;
    KolIdentity {
        name,
        accounts,
        bio,
        followers,
    }
}
