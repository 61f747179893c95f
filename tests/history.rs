//! History and drill-down over HTTP: the invariants between market history,
//! cohorts, wallet detail, whale-positions and position events, on both
//! backends.

use std::collections::{BTreeMap, HashMap};

use bigdecimal::BigDecimal;
use serde_json::Value;

use crate::support::{dec, enc, spawn_app, Backend, TestApp};
use crate::{all_markets, walk, NET};

fn sum(items: &[&Value], key: &str) -> BigDecimal {
    items.iter().map(|v| dec(&v[key])).sum()
}

async fn last_history_point_is_the_current_market(backend: Backend) {
    let app = spawn_app(backend).await;
    let observed = app.get_ok(&format!("{NET}/markets/BTC/cohorts")).await["observedAt"].clone();
    for m in all_markets(&app).await {
        let s = enc(m["symbol"].as_str().unwrap());
        for interval in ["5m", "15m", "1h", "4h", "1d"] {
            let h = app
                .get_ok(&format!(
                    "{NET}/markets/{s}/history?interval={interval}&limit=3"
                ))
                .await;
            let items = h["items"].as_array().unwrap();
            let last = items.last().expect("a market has history");
            assert_eq!(last["observedAt"], observed, "{s} {interval}");
            for key in [
                "price",
                "openInterest",
                "funding",
                "volume24h",
                "longCount",
                "shortCount",
                "longShortRatio",
                "longLiquidationValue",
                "shortLiquidationValue",
            ] {
                assert_eq!(last[key], m[key], "{s} {interval} {key}");
            }
            // Buckets are aligned and ascending.
            let ms = match interval {
                "5m" => 300_000,
                "15m" => 900_000,
                "1h" => 3_600_000,
                "4h" => 14_400_000,
                _ => 86_400_000,
            };
            let times: Vec<i64> = items.iter().map(|i| i["time"].as_i64().unwrap()).collect();
            assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
            assert!(times.iter().all(|t| t % ms == 0), "{times:?}");
        }
    }
}

async fn cohorts_sum_to_the_market_and_its_positions(backend: Backend) {
    let app = spawn_app(backend).await;
    for m in all_markets(&app).await {
        let s = enc(m["symbol"].as_str().unwrap());
        let c = app.get_ok(&format!("{NET}/markets/{s}/cohorts")).await;
        let items = c["items"].as_array().unwrap();
        assert_eq!(items.len(), 6);
        let side = |d: &str| -> Vec<&Value> { items.iter().filter(|i| i["side"] == d).collect() };
        let count = |d: &str| {
            side(d)
                .iter()
                .map(|i| i["count"].as_u64().unwrap())
                .sum::<u64>()
        };
        assert_eq!(count("long"), m["longCount"].as_u64().unwrap(), "{s}");
        assert_eq!(count("short"), m["shortCount"].as_u64().unwrap(), "{s}");
        assert_eq!(
            sum(&side("long"), "liquidationValue"),
            dec(&m["longLiquidationValue"])
        );
        assert_eq!(
            sum(&side("short"), "liquidationValue"),
            dec(&m["shortLiquidationValue"])
        );
        // The last history point splits the same figures by size class.
        let h = app
            .get_ok(&format!("{NET}/markets/{s}/history?limit=1"))
            .await;
        let point = &h["items"][0];
        for i in items {
            let split = &point["bySizeClass"][i["sizeClass"].as_str().unwrap()];
            let d = if i["side"] == "long" { "long" } else { "short" };
            assert_eq!(split[format!("{d}Count")], i["count"]);
            assert_eq!(dec(&split[format!("{d}Value")]), dec(&i["positionValue"]));
            assert_eq!(
                dec(&split[format!("{d}LiquidationValue")]),
                dec(&i["liquidationValue"])
            );
        }
        // Each cohort is the aggregate of its positions.
        if m["symbol"] == "BTC" {
            let (wallets, _) = walk(&app, &format!("{NET}/wallets?limit=200"), "items").await;
            let class: HashMap<&str, &str> = wallets
                .iter()
                .map(|w| {
                    (
                        w["address"].as_str().unwrap(),
                        w["sizeClass"].as_str().unwrap(),
                    )
                })
                .collect();
            let (positions, _) = walk(
                &app,
                &format!("{NET}/markets/BTC/whale-positions?limit=200"),
                "items",
            )
            .await;
            for i in items {
                let of: Vec<&Value> = positions
                    .iter()
                    .filter(|p| {
                        p["direction"] == i["side"]
                            && class[p["address"].as_str().unwrap()] == i["sizeClass"]
                    })
                    .collect();
                assert_eq!(of.len() as u64, i["count"].as_u64().unwrap());
                assert_eq!(sum(&of, "positionValue"), dec(&i["positionValue"]));
                assert_eq!(sum(&of, "uPnl"), dec(&i["uPnl"]));
                if of.is_empty() {
                    assert!(i["averageLeverage"].is_null() && i["averageEntryPrice"].is_null());
                    continue;
                }
                let weighted = |key: &str| -> BigDecimal {
                    of.iter()
                        .map(|p| dec(&p["positionValue"]) * dec(&p[key]))
                        .sum()
                };
                let value = sum(&of, "positionValue");
                let avg = |key: &str, digits: i64| {
                    (weighted(key) / &value)
                        .with_scale_round(digits, bigdecimal::RoundingMode::HalfUp)
                };
                assert_eq!(dec(&i["averageLeverage"]), avg("leverage", 4));
                assert_eq!(dec(&i["averageEntryPrice"]), avg("entryPrice", 8));
            }
        }
    }
}

/// Every position of every market, by wallet.
async fn positions_by_wallet(app: &TestApp) -> HashMap<String, Vec<Value>> {
    let mut out: HashMap<String, Vec<Value>> = HashMap::new();
    for m in all_markets(app).await {
        let s = enc(m["symbol"].as_str().unwrap());
        let (items, _) = walk(
            app,
            &format!("{NET}/markets/{s}/whale-positions?limit=200"),
            "items",
        )
        .await;
        for p in items {
            out.entry(p["address"].as_str().unwrap().to_owned())
                .or_default()
                .push(p);
        }
    }
    out
}

async fn wallet_detail_agrees_with_whale_positions_and_replayed_events(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut by_wallet = positions_by_wallet(&app).await;
    let (wallets, _) = walk(&app, &format!("{NET}/wallets?limit=200"), "items").await;
    assert_eq!(wallets.len(), app.wallets);
    let mut replayed = 0;
    for w in &wallets {
        let a = w["address"].as_str().unwrap();
        let detail = app.get_ok(&format!("{NET}/wallets/{a}")).await;
        assert_eq!(&detail["wallet"], w);
        let positions = detail["positions"].as_array().unwrap();
        assert_eq!(
            positions.len() as u64,
            w["positions"].as_u64().unwrap(),
            "{a}"
        );
        // The same objects as in whale-positions, by value descending then symbol.
        let mut expected = by_wallet.remove(a).unwrap_or_default();
        expected.sort_by(|x, y| {
            dec(&y["positionValue"])
                .cmp(&dec(&x["positionValue"]))
                .then_with(|| x["symbol"].as_str().cmp(&y["symbol"].as_str()))
        });
        assert_eq!(positions, &expected, "{a}");
        // Upper case is the same wallet.
        let upper = format!("0x{}", a[2..].to_uppercase());
        assert_eq!(app.get_ok(&format!("{NET}/wallets/{upper}")).await, detail);

        // Replaying the wallet's events, oldest first, gives its positions.
        let (mut events, _) = walk(
            &app,
            &format!("{NET}/position-events?address={a}&limit=500"),
            "items",
        )
        .await;
        let recent = detail["recentEvents"].as_array().unwrap();
        assert_eq!(recent.as_slice(), &events[..recent.len()], "{a}");
        events.reverse();
        let mut holdings: BTreeMap<String, (String, BigDecimal)> = BTreeMap::new();
        for e in &events {
            let symbol = e["symbol"].as_str().unwrap().to_owned();
            let before = holdings.get(&symbol).cloned();
            match &before {
                None => assert_eq!(e["previousSize"], "0", "{e}"),
                Some((d, size)) => {
                    assert_eq!(&e["previousDirection"], d.as_str(), "{e}");
                    assert_eq!(&dec(&e["previousSize"]), size, "{e}");
                }
            }
            if e["direction"].is_null() {
                holdings.remove(&symbol);
            } else {
                holdings.insert(
                    symbol,
                    (e["direction"].as_str().unwrap().to_owned(), dec(&e["size"])),
                );
            }
        }
        let current: BTreeMap<String, (String, BigDecimal)> = positions
            .iter()
            .map(|p| {
                (
                    p["symbol"].as_str().unwrap().to_owned(),
                    (p["direction"].as_str().unwrap().to_owned(), dec(&p["size"])),
                )
            })
            .collect();
        assert_eq!(holdings, current, "{a}");
        replayed += events.len();
    }
    assert!(by_wallet.is_empty(), "positions of wallets not listed");
    assert!(replayed > app.wallets, "only {replayed} events");
}

async fn history_and_events_page_and_filter(backend: Backend) {
    let app = spawn_app(backend).await;
    // One page equals the walk of small pages.
    let path = format!("{NET}/markets/ETH/history?interval=15m&from=0");
    let whole = app.get_ok(&format!("{path}&limit=5000")).await;
    let (paged, pages) = walk(&app, &format!("{path}&limit=7"), "items").await;
    assert_eq!(whole["items"].as_array().unwrap(), &paged);
    assert!(pages > 2);
    assert!(whole["nextCursor"].is_null());
    // 5-minute buckets are finer than hourly ones where every observation is kept.
    let five = app
        .get_ok(&format!(
            "{NET}/markets/ETH/history?interval=5m&from=0&limit=5000"
        ))
        .await;
    let hour = app
        .get_ok(&format!(
            "{NET}/markets/ETH/history?interval=1h&from=0&limit=5000"
        ))
        .await;
    assert!(five["items"].as_array().unwrap().len() > hour["items"].as_array().unwrap().len());

    let (all, _) = walk(&app, &format!("{NET}/position-events?limit=500"), "items").await;
    assert!(!all.is_empty());
    let key = |e: &Value| {
        (
            std::cmp::Reverse(e["observedAt"].as_str().unwrap().to_owned()),
            e["address"].as_str().unwrap().to_owned(),
            e["symbol"].as_str().unwrap().to_owned(),
        )
    };
    assert!(
        all.windows(2).all(|w| key(&w[0]) < key(&w[1])),
        "newest first"
    );
    let min = BigDecimal::from(100_000);
    let big = |e: &&Value| dec(&e["previousValue"]).max(dec(&e["value"])) >= min;
    for (query, keep) in [
        (
            "kind=opened",
            Box::new(|e: &&Value| e["kind"] == "opened") as Box<dyn Fn(&&Value) -> bool>,
        ),
        ("asset=BTC", Box::new(|e: &&Value| e["symbol"] == "BTC")),
        ("minValue=100000", Box::new(big)),
        (
            "asset=BTC&kind=increased&minValue=100000",
            Box::new(move |e: &&Value| e["symbol"] == "BTC" && e["kind"] == "increased" && big(e)),
        ),
    ] {
        let (got, _) = walk(
            &app,
            &format!("{NET}/position-events?{query}&limit=50"),
            "items",
        )
        .await;
        let expected: Vec<Value> = all.iter().filter(|e| keep(e)).cloned().collect();
        assert_eq!(got, expected, "{query}");
    }
    let newest = all[0]["observedAt"].as_str().unwrap();
    let (since, _) = walk(
        &app,
        &format!("{NET}/position-events?from={newest}&limit=500"),
        "items",
    )
    .await;
    assert!(!since.is_empty() && since.iter().all(|e| e["observedAt"] == newest));

    // whale-positions with minValue: the prefix of the unfiltered list worth at least that.
    let (positions, _) = walk(
        &app,
        &format!("{NET}/markets/BTC/whale-positions?limit=200"),
        "items",
    )
    .await;
    let (filtered, _) = walk(
        &app,
        &format!("{NET}/markets/BTC/whale-positions?minValue=100000&limit=3&direction=long"),
        "items",
    )
    .await;
    let expected: Vec<Value> = positions
        .into_iter()
        .filter(|p| dec(&p["positionValue"]) >= min && p["direction"] == "long")
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(filtered, expected);

    // Bad input is a problem that names the parameter.
    for (path, name) in [
        (format!("{NET}/markets/BTC/history?interval=2h"), "interval"),
        (format!("{NET}/markets/BTC/history?from=10&to=5"), "from"),
        (format!("{NET}/markets/BTC/history?limit=5001"), "limit"),
        (format!("{NET}/position-events?kind=liquidated"), "kind"),
        (format!("{NET}/position-events?minValue=1e6"), "minValue"),
        (format!("{NET}/position-events?address=0x1"), "address"),
        (
            format!("{NET}/markets/BTC/whale-positions?minValue=abc"),
            "minValue",
        ),
    ] {
        let p = app.get_problem(&path, 400).await;
        assert_eq!(p["invalidParams"][0]["name"], name, "{path}: {p}");
    }
    // A cursor of another query is refused.
    let first = app.get_ok(&format!("{NET}/position-events?limit=1")).await;
    let c = enc(first["nextCursor"].as_str().unwrap());
    app.get_problem(
        &format!("{NET}/position-events?limit=1&kind=opened&cursor={c}"),
        400,
    )
    .await;
    let p = app
        .get_problem(&format!("{NET}/wallets/0xnothex"), 400)
        .await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("40 hexadecimal digits"),
        "{p}"
    );
    app.get_problem(
        &format!("{NET}/wallets/0x00000000000000000000000000000000000000aa/history"),
        404,
    )
    .await;
    app.get_problem(&format!("{NET}/markets/NOPE/cohorts"), 404)
        .await;
    app.get_problem(&format!("{NET}/position-events?asset=NOPE"), 404)
        .await;
}

crate::on_both_backends!(
    last_history_point_is_the_current_market,
    cohorts_sum_to_the_market_and_its_positions,
    wallet_detail_agrees_with_whale_positions_and_replayed_events,
    history_and_events_page_and_filter,
);
