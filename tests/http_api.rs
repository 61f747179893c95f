//! Black-box HTTP tests: the real app on a real SQLite file, called over real HTTP.

mod allocator;
mod client;
mod compact;
mod error_contract;
mod history;
mod metrics;
mod outage;
mod postgres_scaleout;
mod ratelimit;
mod saved_version;
mod scanner;
mod schema_conformance;
mod shutdown;
mod slow_clients;
mod stream;
mod support;
mod tracker;
mod webhook_model;
mod webhooks;
mod write_path;

use std::collections::{BTreeMap, HashMap, HashSet};

use bigdecimal::BigDecimal;
use serde_json::Value;
use support::{dec, spawn_app, Backend, TestApp};

const NET: &str = "/v1/networks/perpnet";

async fn all_markets(app: &TestApp) -> Vec<Value> {
    app.get_ok(&format!("{NET}/markets")).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Walks every page of a keyset-paged list and returns all items.
async fn walk(app: &TestApp, path: &str, items_key: &str) -> (Vec<Value>, usize) {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            Some(c) => format!("{path}{sep}cursor={}", support::enc(c)),
            None => path.to_owned(),
        };
        let body = app.get_ok(&url).await;
        pages += 1;
        out.extend(body[items_key].as_array().unwrap().iter().cloned());
        match body["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => {
                assert!(body["nextCursor"].is_null());
                break;
            }
        }
        assert!(pages < 10_000, "pagination does not terminate");
    }
    (out, pages)
}

async fn networks_lists_perpnet_with_asset_count(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = app.get_ok("/v1/networks").await;
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["network"], "perpnet");
    assert!(items[0]["displayName"].is_string());
    assert_eq!(
        items[0]["scanAssetCount"].as_u64().unwrap() as usize,
        all_markets(&app).await.len()
    );
    assert!(body["nextCursor"].is_null());
}

async fn both_prefixes_answer_identically(backend: Backend) {
    let app = spawn_app(backend).await;
    let day = app.today();
    for path in [
        "/networks".to_owned(),
        "/networks/perpnet/markets?sort=openInterest&order=asc".to_owned(),
        "/networks/perpnet/markets/BTC".to_owned(),
        "/networks/perpnet/markets/xyz%3ATSLA".to_owned(),
        "/networks/perpnet/markets/ETH/whale-positions?limit=7&direction=short".to_owned(),
        "/networks/perpnet/wallets?size=whale&sort=roi&limit=5".to_owned(),
        format!("/networks/perpnet/liquidity-levels?fromDate={day}&toDate={day}&asset=BTC"),
        "/networks/perpnet/markets/BTC/candles?interval=4h&from=2026-01-01T00:00:00Z&limit=20"
            .to_owned(),
    ] {
        let a = app.get_raw(&format!("/v1{path}")).await;
        let b = app.get_raw(&format!("/api/developer/v1{path}")).await;
        assert_eq!(a.0, 200, "{path}: {}", a.1);
        assert_eq!(a, b, "{path}");
    }
}

async fn markets_sort_and_order(backend: Backend) {
    let app = spawn_app(backend).await;
    let items = all_markets(&app).await;
    assert!(
        items.len() >= 150,
        "at least 150 assets, got {}",
        items.len()
    );
    assert!(items
        .iter()
        .any(|m| m["symbol"].as_str().unwrap().contains(':')));
    // default: volume24h descending
    let vols: Vec<BigDecimal> = items.iter().map(|m| dec(&m["volume24h"])).collect();
    assert!(vols.windows(2).all(|w| w[0] >= w[1]));
    for key in [
        "volume24h",
        "openInterest",
        "change24hPct",
        "totalLiquidationValue",
    ] {
        for (order, asc) in [
            ("asc", true),
            ("desc", false),
            ("ASC", false),
            ("whatever", false),
        ] {
            let body = app
                .get_ok(&format!("{NET}/markets?sort={key}&order={order}"))
                .await;
            assert_eq!(body["coverage"], "scanned_wallets");
            let vals: Vec<(BigDecimal, String)> = body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (dec(&m[key]), m["symbol"].as_str().unwrap().to_owned()))
                .collect();
            assert_eq!(vals.len(), items.len());
            for w in vals.windows(2) {
                if asc {
                    assert!(
                        w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1),
                        "{key} {order}"
                    );
                } else {
                    assert!(
                        w[0].0 > w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1),
                        "{key} {order}"
                    );
                }
            }
        }
    }
    let p = app
        .get_problem(&format!("{NET}/markets?sort=price"), 400)
        .await;
    assert!(p["detail"].as_str().unwrap().contains("sort"), "{p}");
    assert!(p["detail"].as_str().unwrap().contains("volume24h"), "{p}");
    assert_eq!(p["invalidParams"][0]["name"], "sort");
}

async fn market_fields_are_exact_strings_and_integers(backend: Backend) {
    let app = spawn_app(backend).await;
    for m in all_markets(&app).await {
        for key in [
            "price",
            "change24hPct",
            "volume24h",
            "openInterest",
            "funding",
            "longShortRatio",
            "totalLiquidationValue",
            "longLiquidationValue",
            "shortLiquidationValue",
        ] {
            let s = m[key]
                .as_str()
                .unwrap_or_else(|| panic!("{key} is not a string: {m}"));
            assert!(support::is_plain_decimal(s), "{key} = {s}");
        }
        assert!(m["longCount"].is_u64() && m["shortCount"].is_u64());
        assert_eq!(
            m.as_object().unwrap().len(),
            12,
            "exactly the spec's fields: {m}"
        );
    }
}

async fn market_detail_matches_list_and_resolves_symbols(backend: Backend) {
    let app = spawn_app(backend).await;
    let items = all_markets(&app).await;
    for m in items.iter().take(20) {
        let sym = m["symbol"].as_str().unwrap();
        let detail = app
            .get_ok(&format!("{NET}/markets/{}", support::enc(sym)))
            .await;
        assert_eq!(&detail, m);
    }
    let tsla = app.get_ok(&format!("{NET}/markets/xyz:TSLA")).await;
    assert_eq!(tsla["symbol"], "xyz:TSLA");
    assert_eq!(app.get_ok(&format!("{NET}/markets/xyz%3ATSLA")).await, tsla);
    assert_eq!(
        app.get_ok(&format!("{NET}/markets/TSLA")).await,
        tsla,
        "canonical symbol of a HIP-3 asset"
    );
    assert_eq!(
        app.get_ok(&format!("{NET}/markets/kPEPE")).await["symbol"],
        "kPEPE"
    );
    for bad in ["btc", "NOPE", "KPEPE", "xyz:NOPE"] {
        let p = app.get_problem(&format!("{NET}/markets/{bad}"), 404).await;
        assert!(p["detail"].as_str().unwrap().contains(bad), "{p}");
    }
    let p = app
        .get_problem("/v1/networks/mainnet/markets/BTC", 404)
        .await;
    assert!(p["detail"].as_str().unwrap().contains("perpnet"));
    app.get_problem("/v1/networks/PERPNET/markets", 404).await;
}

async fn whale_positions_order_limits_and_pages(backend: Backend) {
    let app = spawn_app(backend).await;
    let btc = app.get_ok(&format!("{NET}/markets/BTC")).await;
    let body = app
        .get_ok(&format!("{NET}/markets/BTC/whale-positions"))
        .await;
    assert_eq!(body["coverage"], "scanned_wallets");
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 25, "default limit");
    assert!(body["nextCursor"].is_string());
    for limit in ["0", "201", "-1", "abc", "1.5", ""] {
        let p = app
            .get_problem(
                &format!("{NET}/markets/BTC/whale-positions?limit={limit}"),
                400,
            )
            .await;
        assert_eq!(p["invalidParams"][0]["name"], "limit", "{p}");
        assert!(p["detail"].as_str().unwrap().contains("200"));
    }
    assert_eq!(
        app.get_ok(&format!("{NET}/markets/BTC/whale-positions?limit=200"))
            .await["items"]
            .as_array()
            .unwrap()
            .len()
            .min(200),
        200.min(
            btc["longCount"].as_u64().unwrap() as usize
                + btc["shortCount"].as_u64().unwrap() as usize
        )
    );

    let (all, pages) = walk(
        &app,
        &format!("{NET}/markets/BTC/whale-positions?limit=13"),
        "items",
    )
    .await;
    let total = btc["longCount"].as_u64().unwrap() + btc["shortCount"].as_u64().unwrap();
    assert_eq!(all.len() as u64, total);
    assert!(pages > 1);
    let addrs: HashSet<&str> = all.iter().map(|p| p["address"].as_str().unwrap()).collect();
    assert_eq!(addrs.len(), all.len(), "no position repeated");
    for w in all.windows(2) {
        let (a, b) = (dec(&w[0]["positionValue"]), dec(&w[1]["positionValue"]));
        assert!(a > b || (a == b && w[0]["address"].as_str() < w[1]["address"].as_str()));
    }
    for p in &all {
        assert_eq!(p["symbol"], "BTC");
        assert_eq!(p["sizeUnit"], "BTC");
        assert!(p["tags"].is_array());
        assert!(p["observedAt"].as_str().unwrap().ends_with('Z'));
        assert!(
            p["liqPrice"].is_null() || support::is_plain_decimal(p["liqPrice"].as_str().unwrap())
        );
    }
    for (dir, count) in [("long", &btc["longCount"]), ("short", &btc["shortCount"])] {
        let (items, _) = walk(
            &app,
            &format!("{NET}/markets/BTC/whale-positions?direction={dir}&limit=50"),
            "items",
        )
        .await;
        assert_eq!(items.len() as u64, count.as_u64().unwrap());
        assert!(items.iter().all(|p| p["direction"] == dir));
    }
    // a cursor of another direction is foreign
    let long_page = app
        .get_ok(&format!(
            "{NET}/markets/BTC/whale-positions?direction=long&limit=2"
        ))
        .await;
    let c = long_page["nextCursor"].as_str().unwrap();
    let p = app
        .get_problem(
            &format!("{NET}/markets/BTC/whale-positions?direction=short&cursor={c}"),
            400,
        )
        .await;
    assert_eq!(p["invalidParams"][0]["name"], "cursor");
    app.get_problem(
        &format!("{NET}/markets/ETH/whale-positions?direction=long&cursor={c}"),
        400,
    )
    .await;
    app.get_problem(
        &format!("{NET}/markets/BTC/whale-positions?cursor=not-a-cursor"),
        400,
    )
    .await;
    app.get_problem(
        &format!("{NET}/markets/BTC/whale-positions?direction=up"),
        400,
    )
    .await;
    app.get_problem(&format!("{NET}/markets/NOPE/whale-positions"), 404)
        .await;
}

async fn some_positions_have_no_liquidation_price(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut nulls = 0;
    for m in all_markets(&app).await.iter().take(10) {
        let sym = support::enc(m["symbol"].as_str().unwrap());
        let (items, _) = walk(
            &app,
            &format!("{NET}/markets/{sym}/whale-positions?limit=200"),
            "items",
        )
        .await;
        nulls += items.iter().filter(|p| p["liqPrice"].is_null()).count();
    }
    assert!(
        nulls > 0,
        "cross-margin positions without liquidation price exist"
    );
}

async fn wallets_filters_sorts_and_pages(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = app.get_ok(&format!("{NET}/wallets")).await;
    assert_eq!(first["coverage"], "scanned_wallets");
    assert_eq!(first["items"].as_array().unwrap().len(), 25);
    let total = first["total"].as_u64().unwrap() as usize;
    assert_eq!(total, app.wallets);
    let (all, _) = walk(&app, &format!("{NET}/wallets?limit=200"), "items").await;
    assert_eq!(all.len(), total);
    let avs: Vec<BigDecimal> = all.iter().map(|w| dec(&w["accountTotalValue"])).collect();
    assert!(avs.windows(2).all(|w| w[0] >= w[1]));
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    for w in &all {
        let av = dec(&w["accountTotalValue"]);
        let expected = if av >= 1_000_000 {
            "whale"
        } else if av >= 100_000 {
            "shark"
        } else {
            "shrimp"
        };
        assert_eq!(w["sizeClass"], expected, "{w}");
        *classes.entry(expected.to_owned()).or_default() += 1;
        let (l, s) = (dec(&w["longValue"]), dec(&w["shortValue"]));
        assert_eq!(dec(&w["totalPositionValue"]), &l + &s);
        let dir = if l > s {
            "long"
        } else if s > l {
            "short"
        } else {
            "neutral"
        };
        assert_eq!(w["direction"], dir);
        assert!(w["kols"].is_array());
        let n = w["positions"].as_u64().unwrap();
        assert!((1..=12).contains(&n), "1-12 positions per demo wallet");
    }
    assert!(
        classes.get("whale").copied().unwrap_or(0) > 0,
        "{classes:?}"
    );
    assert!(
        all.iter().any(|w| w["netPnl"].is_null()),
        "some wallets lack analytics"
    );
    assert!(
        all.iter().any(|w| !w["label"].is_null()),
        "some wallets have labels"
    );
    assert!(
        all.iter()
            .any(|w| !w["tags"].as_array().unwrap().is_empty()),
        "some wallets have tags"
    );

    for size in ["shrimp", "shark", "whale"] {
        let body = app
            .get_ok(&format!("{NET}/wallets?size={size}&limit=1"))
            .await;
        assert_eq!(body["total"].as_u64().unwrap() as usize, classes[size]);
        let (items, _) = walk(
            &app,
            &format!("{NET}/wallets?size={size}&limit=200&sort=roi&order=asc"),
            "items",
        )
        .await;
        assert_eq!(items.len(), classes[size]);
        assert!(items.iter().all(|w| w["sizeClass"] == size));
    }
    for dir in ["long", "short"] {
        let (items, _) = walk(
            &app,
            &format!("{NET}/wallets?direction={dir}&limit=200"),
            "items",
        )
        .await;
        assert_eq!(
            items.len(),
            all.iter().filter(|w| w["direction"] == dir).count()
        );
    }
    // nullable sort keys: nulls last in both orders, values ordered
    for key in [
        "netPnl",
        "roi",
        "winRate",
        "totalPositionValue",
        "accountTotalValue",
    ] {
        for order in ["asc", "desc"] {
            let (items, _) = walk(
                &app,
                &format!("{NET}/wallets?sort={key}&order={order}&limit=150"),
                "items",
            )
            .await;
            assert_eq!(items.len(), total);
            let first_null = items
                .iter()
                .position(|w| w[key].is_null())
                .unwrap_or(items.len());
            assert!(
                items[first_null..].iter().all(|w| w[key].is_null()),
                "{key}: nulls last"
            );
            for w in items[..first_null].windows(2) {
                let (a, b) = (dec(&w[0][key]), dec(&w[1][key]));
                let ok = if order == "asc" { a <= b } else { a >= b };
                assert!(ok, "{key} {order}");
            }
        }
    }
    let page = app.get_ok(&format!("{NET}/wallets?sort=roi&limit=3")).await;
    let c = page["nextCursor"].as_str().unwrap();
    for foreign in [
        format!("sort=netPnl&cursor={c}"),
        format!("sort=roi&order=asc&cursor={c}"),
        format!("sort=roi&size=whale&cursor={c}"),
    ] {
        let p = app
            .get_problem(&format!("{NET}/wallets?{foreign}"), 400)
            .await;
        assert!(p["detail"].as_str().unwrap().contains("cursor"), "{p}");
    }
    for bad in [
        "size=huge",
        "direction=neutral",
        "sort=name",
        "limit=0",
        "limit=201",
        "cursor=%%%",
    ] {
        let p = app.get_problem(&format!("{NET}/wallets?{bad}"), 400).await;
        let name = bad.split('=').next().unwrap();
        assert_eq!(p["invalidParams"][0]["name"], name, "{p}");
    }
}

async fn unknown_and_repeated_parameters_are_rejected(backend: Backend) {
    let app = spawn_app(backend).await;
    let p = app
        .get_problem(&format!("{NET}/wallets?sizee=whale"), 400)
        .await;
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("sizee") && detail.contains("size, direction, sort, order, limit, cursor"),
        "{detail}"
    );
    let p = app
        .get_problem(&format!("{NET}/wallets?limit=5&limit=6"), 400)
        .await;
    assert!(p["detail"].as_str().unwrap().contains("limit"));
    app.get_problem("/v1/networks?x=1", 400).await;
}

async fn liquidity_levels_windows_and_current_day(backend: Backend) {
    let app = spawn_app(backend).await;
    let today = app.today();
    let from = today - time::Duration::days(89);
    let body = app
        .get_ok(&format!(
            "{NET}/liquidity-levels?fromDate={from}&toDate={today}&asset=BTC&limit=500"
        ))
        .await;
    assert_eq!(body["granularity"], "day");
    assert_eq!(body["fromDate"], from.to_string());
    assert_eq!(body["toDate"], today.to_string());
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 90, "90 days of BTC");
    assert!(body["nextCursor"].is_null());
    let dates: Vec<&str> = items.iter().map(|d| d["date"].as_str().unwrap()).collect();
    assert!(dates.windows(2).all(|w| w[0] < w[1]));
    let last = items.last().unwrap();
    assert_eq!(last["coverage"], "current");
    assert!(items[..89].iter().all(|d| d["coverage"] == "end_of_day"));
    for day in items {
        assert_eq!(day["bucketMethod"], "nearest");
        assert_eq!(day["canonicalAsset"], "BTC");
        assert_eq!(day["networkAssetSymbol"], "BTC");
        let size = dec(&day["bucketSize"]);
        let mut sums: HashMap<&str, (u64, BigDecimal)> = HashMap::new();
        for l in day["levels"].as_array().unwrap() {
            let side = l["side"].as_str().unwrap();
            let e = sums.entry(side).or_insert((0, BigDecimal::from(0)));
            e.0 += l["positionCount"].as_u64().unwrap();
            e.1 += dec(&l["totalAmountUsd"]);
            let (bucket, min, max) = (
                dec(&l["bucketPrice"]),
                dec(&l["minLiquidationPrice"]),
                dec(&l["maxLiquidationPrice"]),
            );
            assert!(min <= max);
            assert_eq!(
                (&bucket / &size).with_scale(0) * &size,
                bucket,
                "bucket is a multiple of the size"
            );
            let half = &size / BigDecimal::from(2);
            assert!(
                &bucket - &half <= min && max <= &bucket + &half,
                "nearest bucket: {l}"
            );
        }
        for side in ["long", "short"] {
            let (count, usd) = sums.remove(side).unwrap_or((0, BigDecimal::from(0)));
            assert_eq!(
                day["totals"][side]["positionCount"].as_u64().unwrap(),
                count
            );
            assert_eq!(dec(&day["totals"][side]["totalAmountUsd"]), usd);
        }
    }
    let btc = app.get_ok(&format!("{NET}/markets/BTC")).await;
    assert_eq!(
        dec(&last["totals"]["long"]["totalAmountUsd"]),
        dec(&btc["longLiquidationValue"])
    );
    assert_eq!(
        dec(&last["totals"]["short"]["totalAmountUsd"]),
        dec(&btc["shortLiquidationValue"])
    );

    // every (date, asset) over a window, paged
    let from3 = today - time::Duration::days(2);
    let n_assets = all_markets(&app).await.len();
    let (all, pages) = walk(
        &app,
        &format!("{NET}/liquidity-levels?fromDate={from3}&toDate={today}&limit=37"),
        "items",
    )
    .await;
    assert_eq!(all.len(), 3 * n_assets);
    assert!(pages > 3);
    let keys: Vec<(String, String)> = all
        .iter()
        .map(|d| {
            (
                d["date"].as_str().unwrap().to_owned(),
                d["networkAssetSymbol"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(keys, sorted, "ordered by date then asset, no repeats");
    let default_page = app
        .get_ok(&format!(
            "{NET}/liquidity-levels?fromDate={from3}&toDate={today}"
        ))
        .await;
    assert_eq!(
        default_page["items"].as_array().unwrap().len(),
        30,
        "default limit 30"
    );

    let from91 = today - time::Duration::days(90);
    for (q, name) in [
        (format!("fromDate={from91}&toDate={today}"), "toDate"),
        (format!("toDate={today}"), "fromDate"),
        (format!("fromDate={today}"), "toDate"),
        (format!("fromDate=2026-02-30&toDate={today}"), "fromDate"),
        (format!("fromDate={today}&toDate=yesterday"), "toDate"),
        (format!("fromDate={today}&toDate={from3}"), "toDate"),
        (
            format!("fromDate={from3}&toDate={today}&limit=501"),
            "limit",
        ),
        (
            format!("fromDate={from3}&toDate={today}&cursor=abc"),
            "cursor",
        ),
    ] {
        let p = app
            .get_problem(&format!("{NET}/liquidity-levels?{q}"), 400)
            .await;
        assert_eq!(p["invalidParams"][0]["name"], name, "{q}: {p}");
    }
    app.get_problem(
        &format!("{NET}/liquidity-levels?fromDate={from3}&toDate={today}&asset=NOPE"),
        404,
    )
    .await;
    // canonical symbol filter
    let tsla = app
        .get_ok(&format!(
            "{NET}/liquidity-levels?fromDate={today}&toDate={today}&asset=TSLA"
        ))
        .await;
    assert_eq!(tsla["items"][0]["networkAssetSymbol"], "xyz:TSLA");
    assert_eq!(tsla["items"][0]["canonicalAsset"], "TSLA");
}

async fn candles_intervals_windows_and_rollups(backend: Backend) {
    // `to` is pinned to the seeding time: with the default (now) a run that
    // crosses the next hour would miss the not-yet-generated candle.
    let app = spawn_app(backend).await;
    let body = app
        .get_ok(&format!(
            "{NET}/markets/BTC/candles?interval=1h&to={}",
            support::seeded_at().unix_timestamp() * 1000
        ))
        .await;
    assert_eq!(body["coin"], "BTC");
    assert_eq!(body["canonicalAsset"], "BTC");
    assert_eq!(body["network"], "perpnet");
    assert_eq!(body["interval"], "1h");
    let candles = body["candles"].as_array().unwrap();
    assert_eq!(candles.len(), 500, "limit candles by default");
    for w in candles.windows(2) {
        assert_eq!(
            w[1]["time"].as_i64().unwrap() - w[0]["time"].as_i64().unwrap(),
            3_600_000
        );
    }
    for c in candles {
        let t = c["time"].as_i64().unwrap();
        assert_eq!(t % 3_600_000, 0);
        let ot = time::OffsetDateTime::parse(
            c["openTime"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        assert_eq!((ot.unix_timestamp_nanos() / 1_000_000) as i64, t);
        assert!(c["openTime"].as_str().unwrap().ends_with('Z'));
        let (o, h, l, cl) = (
            dec(&c["open"]),
            dec(&c["high"]),
            dec(&c["low"]),
            dec(&c["close"]),
        );
        assert!(l <= o && l <= cl && h >= o && h >= cl);
        assert!(c["trades"].is_u64());
    }
    // the latest close is the market price
    let btc = app.get_ok(&format!("{NET}/markets/BTC")).await;
    assert_eq!(candles.last().unwrap()["close"], btc["price"]);

    // paging with the cursor covers the window exactly once
    let from = candles[0]["time"].as_i64().unwrap();
    let to = candles.last().unwrap()["time"].as_i64().unwrap();
    let mut seen = Vec::new();
    let mut url = format!("{NET}/markets/BTC/candles?interval=1h&from={from}&to={to}&limit=120");
    loop {
        let page = app.get_ok(&url).await;
        seen.extend(
            page["candles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["time"].as_i64().unwrap()),
        );
        match page["nextCursor"].as_str() {
            Some(c) => {
                assert!(c.parse::<i64>().is_ok(), "epoch ms cursor");
                url = format!("{NET}/markets/BTC/candles?interval=1h&cursor={c}&to={to}&limit=120");
            }
            None => break,
        }
    }
    let expected: Vec<i64> = candles
        .iter()
        .map(|c| c["time"].as_i64().unwrap())
        .collect();
    assert_eq!(seen, expected);

    // 4h and 1d are rolled up from 1h, aligned to UTC
    let from_iso = time::OffsetDateTime::from_unix_timestamp(from / 1000).unwrap();
    let day_start = from_iso.date().next_day().unwrap().midnight().assume_utc();
    let ds = (day_start.unix_timestamp()) * 1000;
    let h1 = app
        .get_ok(&format!(
            "{NET}/markets/BTC/candles?interval=1h&from={ds}&limit=24"
        ))
        .await;
    let d1 = app
        .get_ok(&format!(
            "{NET}/markets/BTC/candles?interval=1d&from={ds}&limit=1"
        ))
        .await;
    let hours = h1["candles"].as_array().unwrap();
    let day = &d1["candles"][0];
    assert_eq!(day["time"].as_i64().unwrap(), ds);
    assert_eq!(day["open"], hours[0]["open"]);
    assert_eq!(day["close"], hours[23]["close"]);
    assert_eq!(
        dec(&day["high"]),
        hours.iter().map(|c| dec(&c["high"])).max().unwrap()
    );
    assert_eq!(
        dec(&day["low"]),
        hours.iter().map(|c| dec(&c["low"])).min().unwrap()
    );
    assert_eq!(
        dec(&day["volume"]),
        hours.iter().map(|c| dec(&c["volume"])).sum::<BigDecimal>()
    );
    assert_eq!(
        day["trades"].as_u64().unwrap(),
        hours
            .iter()
            .map(|c| c["trades"].as_u64().unwrap())
            .sum::<u64>()
    );
    let h4 = app
        .get_ok(&format!(
            "{NET}/markets/BTC/candles?interval=4h&from={ds}&limit=6"
        ))
        .await;
    let h4c = h4["candles"].as_array().unwrap();
    assert_eq!(h4c.len(), 6);
    assert!(h4c
        .iter()
        .all(|c| c["time"].as_i64().unwrap() % (4 * 3_600_000) == 0));
    assert_eq!(h4c[1]["open"], hours[4]["open"]);
    // fine intervals come from the stored 1m candles
    let m15 = app
        .get_ok(&format!("{NET}/markets/BTC/candles?interval=15m&limit=8"))
        .await;
    assert!(!m15["candles"].as_array().unwrap().is_empty());
    let w1 = app
        .get_ok(&format!("{NET}/markets/BTC/candles?interval=1w&limit=20"))
        .await;
    for c in w1["candles"].as_array().unwrap() {
        let t =
            time::OffsetDateTime::from_unix_timestamp(c["time"].as_i64().unwrap() / 1000).unwrap();
        assert_eq!(t.weekday(), time::Weekday::Monday);
        assert_eq!(t.time(), time::Time::MIDNIGHT);
    }
    // ISO instants work like epoch ms
    let iso = app
        .get_ok(&format!(
            "{NET}/markets/BTC/candles?interval=1h&from={}&limit=3",
            support::enc(&market_model::timestamp::format_utc(day_start))
        ))
        .await;
    assert_eq!(iso["candles"][0]["time"].as_i64().unwrap(), ds);

    for (q, name) in [
        ("", "interval"),
        ("interval=2m", "interval"),
        ("interval=1H", "interval"),
        ("interval=1h&limit=5001", "limit"),
        ("interval=1h&limit=0", "limit"),
        ("interval=1h&from=yesterday", "from"),
        ("interval=1h&to=2026-13-01T00:00:00Z", "to"),
        ("interval=1h&cursor=abc", "cursor"),
        ("interval=1h&from=1795003200000&to=1794003200000", "from"),
    ] {
        let p = app
            .get_problem(&format!("{NET}/markets/BTC/candles?{q}"), 400)
            .await;
        assert_eq!(p["invalidParams"][0]["name"], name, "{q}: {p}");
    }
    app.get_problem(&format!("{NET}/markets/NOPE/candles?interval=1h"), 404)
        .await;
}

async fn cross_endpoint_invariants_hold(backend: Backend) {
    let app = spawn_app(backend).await;
    let markets = all_markets(&app).await;
    let (wallets, _) = walk(&app, &format!("{NET}/wallets?limit=200"), "items").await;
    let mut long_by_wallet: HashMap<String, BigDecimal> = HashMap::new();
    let mut short_by_wallet: HashMap<String, BigDecimal> = HashMap::new();
    let mut count_by_wallet: HashMap<String, u64> = HashMap::new();
    let mut total_positions = 0u64;
    let mut covered_by_market: BTreeMap<String, BigDecimal> = BTreeMap::new();
    let today = app.today();
    let current: HashMap<String, Value> = {
        let (days, _) = walk(
            &app,
            &format!("{NET}/liquidity-levels?fromDate={today}&toDate={today}&limit=500"),
            "items",
        )
        .await;
        days.into_iter()
            .map(|d| (d["networkAssetSymbol"].as_str().unwrap().to_owned(), d))
            .collect()
    };
    assert_eq!(current.len(), markets.len());
    for m in &markets {
        let sym = m["symbol"].as_str().unwrap();
        let (positions, _) = walk(
            &app,
            &format!(
                "{NET}/markets/{}/whale-positions?limit=200",
                support::enc(sym)
            ),
            "items",
        )
        .await;
        let longs: Vec<&Value> = positions
            .iter()
            .filter(|p| p["direction"] == "long")
            .collect();
        let shorts: Vec<&Value> = positions
            .iter()
            .filter(|p| p["direction"] == "short")
            .collect();
        assert_eq!(
            m["longCount"].as_u64().unwrap(),
            longs.len() as u64,
            "{sym}"
        );
        assert_eq!(
            m["shortCount"].as_u64().unwrap(),
            shorts.len() as u64,
            "{sym}"
        );
        let liq_sum = |ps: &[&Value]| {
            ps.iter()
                .filter(|p| !p["liqPrice"].is_null())
                .map(|p| dec(&p["positionValue"]))
                .sum::<BigDecimal>()
        };
        assert_eq!(dec(&m["longLiquidationValue"]), liq_sum(&longs), "{sym}");
        assert_eq!(dec(&m["shortLiquidationValue"]), liq_sum(&shorts), "{sym}");
        assert_eq!(
            dec(&m["totalLiquidationValue"]),
            dec(&m["longLiquidationValue"]) + dec(&m["shortLiquidationValue"])
        );
        let (l, s) = (longs.len() as u64, shorts.len() as u64);
        let expected_ratio = if s == 0 {
            BigDecimal::from(l)
        } else {
            (BigDecimal::from(l) / BigDecimal::from(s))
                .with_scale_round(4, bigdecimal::RoundingMode::HalfUp)
        };
        assert_eq!(dec(&m["longShortRatio"]), expected_ratio, "{sym}");
        let day = &current[sym];
        assert_eq!(day["coverage"], "current");
        assert_eq!(
            dec(&day["totals"]["long"]["totalAmountUsd"]),
            dec(&m["longLiquidationValue"]),
            "{sym}"
        );
        assert_eq!(
            dec(&day["totals"]["short"]["totalAmountUsd"]),
            dec(&m["shortLiquidationValue"]),
            "{sym}"
        );
        let with_liq =
            |ps: &[&Value]| ps.iter().filter(|p| !p["liqPrice"].is_null()).count() as u64;
        assert_eq!(
            day["totals"]["long"]["positionCount"].as_u64().unwrap(),
            with_liq(&longs)
        );
        assert_eq!(
            day["totals"]["short"]["positionCount"].as_u64().unwrap(),
            with_liq(&shorts)
        );
        for p in &positions {
            let addr = p["address"].as_str().unwrap().to_owned();
            let target = if p["direction"] == "long" {
                &mut long_by_wallet
            } else {
                &mut short_by_wallet
            };
            *target
                .entry(addr.clone())
                .or_insert_with(|| BigDecimal::from(0)) += dec(&p["positionValue"]);
            *count_by_wallet.entry(addr).or_default() += 1;
        }
        total_positions += positions.len() as u64;
        // Every open position has two sides: the scanned sizes of both,
        // halved and priced, are what the coverage report counts as covered.
        let units: BigDecimal = positions.iter().map(|p| dec(&p["size"])).sum();
        let covered = (units * dec(&m["price"]) / BigDecimal::from(2))
            .with_scale_round(2, bigdecimal::RoundingMode::HalfUp);
        covered_by_market.insert(sym.to_owned(), covered);
    }
    check_coverage(&app, &markets, &wallets, &covered_by_market).await;
    let wallet_positions: u64 = wallets
        .iter()
        .map(|w| w["positions"].as_u64().unwrap())
        .sum();
    assert_eq!(wallet_positions, total_positions);
    let market_positions: u64 = markets
        .iter()
        .map(|m| m["longCount"].as_u64().unwrap() + m["shortCount"].as_u64().unwrap())
        .sum();
    assert_eq!(market_positions, total_positions);
    for w in &wallets {
        let a = w["address"].as_str().unwrap();
        let zero = BigDecimal::from(0);
        assert_eq!(
            dec(&w["longValue"]),
            *long_by_wallet.get(a).unwrap_or(&zero),
            "{a}"
        );
        assert_eq!(
            dec(&w["shortValue"]),
            *short_by_wallet.get(a).unwrap_or(&zero),
            "{a}"
        );
        assert_eq!(
            w["positions"].as_u64().unwrap(),
            count_by_wallet.get(a).copied().unwrap_or(0)
        );
    }
}

/// The coverage report agrees with the market list, the positions behind
/// each market and the wallet list.
async fn check_coverage(
    app: &TestApp,
    markets: &[Value],
    wallets: &[Value],
    covered_by_market: &BTreeMap<String, BigDecimal>,
) {
    let c = app.get_ok(&format!("{NET}/coverage")).await;
    let items = c["markets"].as_array().unwrap();
    let symbols: Vec<&str> = items
        .iter()
        .map(|m| m["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(
        symbols,
        covered_by_market
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        "one entry per market, by symbol"
    );
    let by_symbol: HashMap<&str, &Value> = markets
        .iter()
        .map(|m| (m["symbol"].as_str().unwrap(), m))
        .collect();
    let share = |covered: &BigDecimal, total: &BigDecimal| {
        (covered / total).with_scale_round(4, bigdecimal::RoundingMode::HalfUp)
    };
    let mut oi = BigDecimal::from(0);
    let mut covered = BigDecimal::from(0);
    for item in items {
        let sym = item["symbol"].as_str().unwrap();
        assert_eq!(
            item["openInterest"], by_symbol[sym]["openInterest"],
            "{sym}"
        );
        assert_eq!(
            dec(&item["coveredOpenInterest"]),
            covered_by_market[sym],
            "{sym}"
        );
        let market_oi = dec(&item["openInterest"]);
        if bigdecimal::Signed::is_positive(&market_oi) {
            assert_eq!(
                dec(&item["coveredShare"]),
                share(&covered_by_market[sym], &market_oi)
            );
        } else {
            assert!(item["coveredShare"].is_null(), "{sym}");
        }
        oi += market_oi;
        covered += &covered_by_market[sym];
    }
    assert_eq!(dec(&c["openInterest"]), oi);
    assert_eq!(dec(&c["coveredOpenInterest"]), covered);
    assert_eq!(dec(&c["coveredShare"]), share(&covered, &oi));

    // Without `track` the tracked wallets are the served ones, all read.
    let w = &c["wallets"];
    assert_eq!(w["tracked"].as_u64().unwrap(), wallets.len() as u64);
    assert_eq!(w["neverRead"], 0);
    let (m1, m5, h1) = (
        w["refreshedWithin1m"].as_u64().unwrap(),
        w["refreshedWithin5m"].as_u64().unwrap(),
        w["refreshedWithin1h"].as_u64().unwrap(),
    );
    assert!(m1 <= m5 && m5 <= h1 && h1 <= wallets.len() as u64);
    let classes = w["bySizeClass"].as_array().unwrap();
    let names: Vec<&str> = classes
        .iter()
        .map(|k| k["sizeClass"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["whale", "shark", "shrimp"]);
    let as_of = time::OffsetDateTime::parse(
        c["asOf"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    for k in classes {
        let class = k["sizeClass"].as_str().unwrap();
        let mut ages: Vec<i64> = wallets
            .iter()
            .filter(|w| w["sizeClass"] == class)
            .map(|w| {
                let at = time::OffsetDateTime::parse(
                    w["observedAt"].as_str().unwrap(),
                    &time::format_description::well_known::Rfc3339,
                )
                .unwrap();
                (as_of - at).whole_seconds().max(0)
            })
            .collect();
        ages.sort_unstable();
        assert_eq!(k["wallets"].as_u64().unwrap(), ages.len() as u64, "{class}");
        let rank = |pct: usize| ages[(ages.len() * pct).div_ceil(100).max(1) - 1];
        if ages.is_empty() {
            assert!(k["p50Seconds"].is_null() && k["p99Seconds"].is_null());
        } else {
            assert_eq!(k["p50Seconds"].as_i64().unwrap(), rank(50), "{class}");
            assert_eq!(k["p99Seconds"].as_i64().unwrap(), rank(99), "{class}");
        }
    }
}

async fn authentication_is_required_except_on_public_routes(backend: Backend) {
    let app = spawn_app(backend).await;
    let paths = [
        "/v1/networks".to_owned(),
        format!("{NET}/markets"),
        format!("{NET}/markets/BTC"),
        format!("{NET}/markets/BTC/whale-positions"),
        format!("{NET}/wallets"),
        format!("{NET}/liquidity-levels?fromDate=2026-01-01&toDate=2026-01-02"),
        format!("{NET}/markets/BTC/candles?interval=1h"),
        format!("{NET}/coverage"),
        "/api/developer/v1/networks".to_owned(),
        "/v1/nothing-here".to_owned(),
    ];
    for path in &paths {
        for (header, value) in [
            (None, ""),
            (Some("X-API-Key"), ""),
            (Some("X-API-Key"), "wrong"),
            (
                Some("X-API-Key"),
                "mds_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            ),
            (Some("Authorization"), "Bearer x"),
        ] {
            let res = app.request(path, header.map(|h| (h, value))).await;
            assert_eq!(res.status().as_u16(), 401, "{path} {header:?}={value}");
            assert_eq!(res.headers()["content-type"], "application/problem+json");
            let p: Value = res.json().await.unwrap();
            assert_eq!(p["status"], 401);
            assert!(
                p["detail"].as_str().unwrap().contains("X-API-Key")
                    || p["detail"].as_str().unwrap().contains("not known"),
                "{p}"
            );
        }
    }
    let bearer = app
        .request(
            "/v1/networks",
            Some(("Authorization", &format!("Bearer {}", app.token))),
        )
        .await;
    assert_eq!(bearer.status().as_u16(), 401);
    let p: Value = bearer.json().await.unwrap();
    assert!(p["detail"].as_str().unwrap().contains("X-API-Key"));
    for public in [
        "/healthz",
        "/readyz",
        "/api-docs/openapi.json",
        "/swagger-ui/",
    ] {
        let res = app.request(public, None).await;
        assert_eq!(res.status().as_u16(), 200, "{public}");
    }
    let doc: Value = app
        .request("/api-docs/openapi.json", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        doc["components"]["securitySchemes"]["apiKey"]["in"],
        "header"
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["apiKey"]["name"],
        "X-API-Key"
    );
    for p in [
        "/v1/networks/{network}/markets",
        "/v1/networks/{network}/markets/{asset}/candles",
    ] {
        assert!(doc["paths"][p]["get"].is_object(), "{p} documented");
    }
    assert_eq!(doc["servers"][1]["url"], "/api/developer");
}

async fn errors_are_problem_details(backend: Backend) {
    let app = spawn_app(backend).await;
    let p = app.get_problem("/v1/nothing", 404).await;
    assert_eq!(p["instance"], "/v1/nothing");
    let p = app.get_problem("/no/such/path", 404).await;
    assert!(p["type"].is_string() && p["title"].is_string());
    let res = app
        .client
        .post(app.url(&format!("{NET}/markets")))
        .header("X-API-Key", &app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 405);
    assert_eq!(res.headers()["allow"], "GET, HEAD");
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let res = app
        .client
        .delete(app.url("/v1/networks"))
        .header("X-API-Key", &app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 405);
    // request ids: echoed when valid, generated otherwise
    let res = app
        .client
        .get(app.url("/v1/networks"))
        .header("X-API-Key", &app.token)
        .header("X-Request-Id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "abc-123");
    let res = app
        .client
        .get(app.url("/v1/networks"))
        .header("X-API-Key", &app.token)
        .header("X-Request-Id", "bad id!")
        .send()
        .await
        .unwrap();
    assert_ne!(res.headers()["x-request-id"], "bad id!");
    let p = app
        .get_problem(&format!("{NET}/wallets?limit=999"), 400)
        .await;
    for key in ["type", "title", "status", "detail", "instance", "requestId"] {
        assert!(!p[key].is_null(), "{key} in {p}");
    }
}

async fn a_server_fault_is_a_generic_500_problem(backend: Backend) {
    use diesel::connection::SimpleConnection;
    let app = spawn_app(backend).await;
    // Break the candle table behind the app's back: reading it must fail cleanly.
    app.store
        .raw_connection()
        .unwrap()
        .batch_execute("ALTER TABLE candles RENAME TO candles_moved")
        .unwrap();
    let res = app
        .request(
            &format!("{NET}/markets/ETH/candles?interval=1h&limit=5"),
            Some(("X-API-Key", &app.token)),
        )
        .await;
    assert_eq!(res.status().as_u16(), 500);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let rid = res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let p: Value = res.json().await.unwrap();
    assert_eq!(p["status"], 500);
    assert_eq!(p["requestId"], rid.as_str());
    let detail = p["detail"].as_str().unwrap();
    assert!(
        !detail.contains("candles") && !detail.to_lowercase().contains("sql"),
        "no internals leak: {detail}"
    );
    // memory-served data is unaffected
    app.get_ok(&format!("{NET}/markets/ETH")).await;
}

async fn conditional_requests_and_freshness_headers(backend: Backend) {
    let app = spawn_app(backend).await;
    for path in [
        format!("{NET}/markets"),
        format!("{NET}/wallets?limit=3"),
        format!("{NET}/markets/BTC/candles?interval=1h&limit=3"),
    ] {
        let res = app.request(&path, Some(("X-API-Key", &app.token))).await;
        assert_eq!(res.status().as_u16(), 200);
        let etag = res.headers()["etag"].to_str().unwrap().to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        assert!(res.headers().contains_key("last-modified"));
        assert_eq!(res.headers()["cache-control"], "no-cache");
        let version = res.headers()["x-data-version"].to_str().unwrap().to_owned();
        let again = app
            .client
            .get(app.url(&path))
            .header("X-API-Key", &app.token)
            .header("If-None-Match", format!("\"other\", {etag}"))
            .send()
            .await
            .unwrap();
        assert_eq!(again.status().as_u16(), 304, "{path}");
        assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
        assert_eq!(again.headers()["x-data-version"].to_str().unwrap(), version);
        assert!(again.bytes().await.unwrap().is_empty());
        let changed = app
            .client
            .get(app.url(&path))
            .header("X-API-Key", &app.token)
            .header("If-None-Match", "\"stale\"")
            .send()
            .await
            .unwrap();
        assert_eq!(changed.status().as_u16(), 200);
    }
}

/// The explorer needs no key (it asks for one), revalidates by `ETag`, and
/// its policy keeps the browser on this origin.
async fn the_explorer_is_served_and_locked_to_its_origin(backend: Backend) {
    let app = spawn_app(backend).await;
    for (path, content_type) in [
        ("/explore", "text/html; charset=utf-8"),
        ("/explore/", "text/html; charset=utf-8"),
        ("/explore/explore.js", "text/javascript; charset=utf-8"),
        ("/explore/explore.css", "text/css; charset=utf-8"),
        ("/explore/favicon.svg", "image/svg+xml"),
    ] {
        let res = app.request(path, None).await;
        assert_eq!(res.status().as_u16(), 200, "{path}");
        let headers = res.headers().clone();
        assert_eq!(headers["content-type"], content_type, "{path}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'none'"), "{csp}");
        assert!(csp.contains("connect-src 'self'"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        let etag = headers["etag"].to_str().unwrap().to_owned();
        assert!(!res.bytes().await.unwrap().is_empty());
        let again = app.request(path, Some(("If-None-Match", &etag))).await;
        assert_eq!(again.status().as_u16(), 304, "{path}");
        let head = app.client.head(app.url(path)).send().await.unwrap();
        assert_eq!(head.status().as_u16(), 200, "HEAD {path}");
    }
    let page = app.request("/explore", None).await.text().await.unwrap();
    assert!(page.contains("<script src=\"/explore/explore.js\" defer></script>"));
    let missing = app.request("/explore/nothing.js", None).await;
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(
        missing.headers()["content-type"],
        "application/problem+json"
    );
}

/// A sink the test reads back.
#[derive(Clone, Default)]
struct SharedSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
impl std::io::Write for SharedSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every answer gets a line (rejections by the middleware too), in JSON when
/// asked, with the request id answered, and a key in the query is never
/// written.
async fn the_access_log_has_a_line_per_answer(backend: Backend) {
    use market_data_server::access_log::{AccessLog, Format};
    let app = spawn_app(backend).await;
    let sink = SharedSink::default();
    let log = AccessLog::start(Format::Json, Box::new(sink.clone()), 1024);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = market_data_server::app::serve(
        listener,
        app.state.clone(),
        market_data_server::app::ServeOptions {
            access_log: Some(log.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    tokio::spawn(server);
    let client = reqwest::Client::new();
    let mut sent = Vec::new();
    for (path, key, status) in [
        ("/v1/networks/perpnet/markets/BTC", true, 200),
        ("/v1/networks/perpnet/markets/NOPE", true, 404),
        ("/v1/networks", false, 401),
        ("/v1/networks?api_key=mds_secret", true, 400),
        ("/explore", false, 200),
    ] {
        let mut req = client.get(format!("{base}{path}"));
        if key {
            req = req.header("X-API-Key", &app.token);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "{path}");
        let rid = res.headers()["x-request-id"].to_str().unwrap().to_owned();
        let len = res.bytes().await.unwrap().len() as u64;
        sent.push((path, status, rid, len));
    }
    assert!(log.flush(std::time::Duration::from_secs(5)));
    let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    assert!(!text.contains("mds_secret"), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), sent.len(), "{text}");
    for (line, (path, status, rid, len)) in lines.iter().zip(&sent) {
        let logged = if path.contains("api_key") {
            "/v1/networks?<redacted>"
        } else {
            path
        };
        assert_eq!(line["path"], *logged);
        assert_eq!(line["status"], *status);
        assert_eq!(line["requestId"], rid.as_str());
        assert_eq!(line["bytes"], *len, "{path}");
        assert_eq!(line["method"], "GET");
        assert_eq!(line["remote"], "127.0.0.1");
        assert!(line["durationMs"].as_f64().unwrap() >= 0.0);
    }
    assert_eq!(log.dropped(), 0);
}

/// `Accept: text/csv` on a list: the same pages as JSON (followed by their
/// `Link: rel="next"` to the end), a header row, decimals exactly as in
/// JSON; liquidity days as one row per level. Problems stay JSON, and an
/// endpoint that is not a list answers 406.
async fn lists_are_served_as_csv_with_link_paging(backend: Backend) {
    let app = spawn_app(backend).await;
    let csv_get = |path: String| {
        let req = app
            .client
            .get(app.url(&path))
            .header("X-API-Key", &app.token)
            .header("Accept", "text/csv");
        async move { req.send().await.unwrap() }
    };
    let parse = |text: &str| -> (Vec<String>, Vec<Vec<String>>) {
        assert!(text.ends_with("\r\n"), "CRLF line ends");
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header = reader
            .headers()
            .unwrap()
            .iter()
            .map(str::to_owned)
            .collect();
        let rows = reader
            .records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect();
        (header, rows)
    };
    let link_of = |res: &reqwest::Response| -> Option<String> {
        res.headers().get("link").map(|l| {
            let l = l.to_str().unwrap();
            assert!(l.ends_with(">; rel=\"next\""), "{l}");
            l[1..l.find('>').unwrap()].to_owned()
        })
    };

    // Every BTC position, 7 a page, CSV pages followed by Link against the
    // JSON pages followed by nextCursor: the same rows, the same decimals.
    let market = app.get_ok(&format!("{NET}/markets/BTC")).await;
    let count = market["longCount"].as_u64().unwrap() + market["shortCount"].as_u64().unwrap();
    let mut json_rows = Vec::new();
    let mut next = Some(format!("{NET}/markets/BTC/whale-positions?limit=7"));
    while let Some(path) = next.take() {
        let res = app.request(&path, Some(("X-API-Key", &app.token))).await;
        let link = link_of(&res);
        let page: Value = res.json().await.unwrap();
        json_rows.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(cursor) => {
                let link = link.expect("a Link while there is a next page");
                assert!(link.ends_with(&format!("cursor={cursor}")), "{link}");
                next = Some(link);
            }
            None => assert_eq!(link, None, "no Link on the last page"),
        }
    }
    assert_eq!(json_rows.len() as u64, count);
    let mut csv_rows = Vec::new();
    let mut header = Vec::new();
    let mut next = Some(format!("{NET}/markets/BTC/whale-positions?limit=7"));
    let mut pages = 0;
    while let Some(path) = next.take() {
        let res = csv_get(path).await;
        assert_eq!(res.status(), 200);
        assert_eq!(
            res.headers()["content-type"],
            "text/csv; charset=utf-8; header=present"
        );
        assert!(res.headers()["vary"].to_str().unwrap().contains("accept"));
        next = link_of(&res);
        let (h, rows) = parse(&res.text().await.unwrap());
        assert!(rows.len() <= 7);
        header = h;
        csv_rows.extend(rows);
        pages += 1;
    }
    assert!(pages > 2, "paged: {pages} pages");
    assert_eq!(
        csv_rows.len(),
        json_rows.len(),
        "as many rows as the JSON pages have items"
    );
    assert_eq!(header[..3], ["address", "tags", "symbol"]);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (row, item) in csv_rows.iter().zip(&json_rows) {
        assert_eq!(row.len(), header.len());
        for name in [
            "address",
            "positionValue",
            "size",
            "entryPrice",
            "uPnl",
            "observedAt",
        ] {
            assert_eq!(row[col(name)], item[name].as_str().unwrap(), "{name}");
        }
        let liq = &row[col("liqPrice")];
        assert_eq!(
            liq.as_str(),
            item["liqPrice"].as_str().unwrap_or(""),
            "liqPrice"
        );
        let tags: Vec<&str> = item["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(row[col("tags")], tags.join(";"));
    }

    // Under the alias prefix, the Link stays under it.
    let alias = csv_get(format!(
        "/api/developer{NET}/markets/BTC/whale-positions?limit=7"
    ))
    .await;
    let link = link_of(&alias).expect("a next page");
    assert!(
        link.starts_with(&format!(
            "/api/developer{NET}/markets/BTC/whale-positions?limit=7&cursor="
        )),
        "{link}"
    );
    assert_eq!(csv_get(link).await.status(), 200);

    // A liquidity day: one row per level, each with its day's fields.
    let today = app.today();
    let path = format!("{NET}/liquidity-levels?fromDate={today}&toDate={today}&asset=BTC");
    let day = app.get_ok(&path).await["items"][0].clone();
    let levels = day["levels"].as_array().unwrap();
    let (header, rows) = parse(&csv_get(path).await.text().await.unwrap());
    assert_eq!(rows.len(), levels.len());
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (row, level) in rows.iter().zip(levels) {
        assert_eq!(row[col("date")], day["date"].as_str().unwrap());
        assert_eq!(
            row[col("totals.long.totalAmountUsd")],
            day["totals"]["long"]["totalAmountUsd"].as_str().unwrap()
        );
        assert_eq!(row[col("side")], level["side"].as_str().unwrap());
        assert_eq!(
            row[col("totalAmountUsd")],
            level["totalAmountUsd"].as_str().unwrap()
        );
    }

    // Every other list answers CSV with a header row.
    for path in [
        "/v1/networks".to_owned(),
        format!("{NET}/markets"),
        format!("{NET}/wallets?size=whale"),
        format!("{NET}/position-events?limit=5"),
        format!("{NET}/markets/BTC/candles?interval=1h&limit=5"),
        format!("{NET}/markets/BTC/history?interval=1h"),
    ] {
        let res = csv_get(path.clone()).await;
        assert_eq!(res.status(), 200, "{path}");
        let (header, _) = parse(&res.text().await.unwrap());
        assert!(header.len() >= 3, "{path}: {header:?}");
    }

    // Problems stay JSON; an endpoint that is not a list answers 406; the
    // two representations have their own tags.
    let bad = csv_get(format!("{NET}/wallets?limit=0")).await;
    assert_eq!(bad.status(), 400);
    assert_eq!(bad.headers()["content-type"], "application/problem+json");
    let either = app
        .client
        .get(app.url(&format!("{NET}/markets/BTC")))
        .header("X-API-Key", &app.token)
        .header("Accept", "text/csv, */*")
        .send()
        .await
        .unwrap();
    assert_eq!(either.status(), 200, "JSON is acceptable too");
    assert_eq!(either.headers()["content-type"], "application/json");
    let detail = csv_get(format!("{NET}/markets/BTC")).await;
    assert_eq!(detail.status(), 406);
    assert_eq!(detail.headers()["content-type"], "application/problem+json");
    let p: Value = detail.json().await.unwrap();
    assert!(
        p["detail"].as_str().unwrap().contains("application/json"),
        "{p}"
    );
    let json_tag = app
        .request(&format!("{NET}/markets"), Some(("X-API-Key", &app.token)))
        .await
        .headers()["etag"]
        .clone();
    let csv_tag = csv_get(format!("{NET}/markets")).await.headers()["etag"].clone();
    assert_ne!(json_tag, csv_tag);
    let again = app
        .client
        .get(app.url(&format!("{NET}/markets")))
        .header("X-API-Key", &app.token)
        .header("Accept", "text/csv")
        .header("If-None-Match", csv_tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
}

/// brotli, zstd and gzip are negotiated from `Accept-Encoding` (q-values
/// first, then the server's order: zstd, br, gzip); each decodes to the
/// identity body, and caches are told to key on the header.
async fn encodings_are_negotiated(backend: Backend) {
    use std::io::Read;
    let app = spawn_app(backend).await;
    let path = format!("{NET}/markets");
    let fetch = |accept: Option<&'static str>| {
        let mut req = app
            .client
            .get(app.url(&path))
            .header("X-API-Key", &app.token);
        if let Some(accept) = accept {
            req = req.header("Accept-Encoding", accept);
        }
        async move {
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 200);
            let encoding = res
                .headers()
                .get("content-encoding")
                .map(|v| v.to_str().unwrap().to_owned());
            let vary = res
                .headers()
                .get("vary")
                .map(|v| v.to_str().unwrap().to_owned());
            (encoding, vary, res.bytes().await.unwrap().to_vec())
        }
    };
    let (none, _, identity) = fetch(None).await;
    assert_eq!(none, None);
    assert!(identity.len() > 4096, "a body worth compressing");
    let decode = |encoding: &str, body: &[u8]| -> Vec<u8> {
        let mut out = Vec::new();
        match encoding {
            "br" => brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut out)
                .unwrap(),
            "zstd" => zstd::stream::read::Decoder::new(body)
                .unwrap()
                .read_to_end(&mut out)
                .unwrap(),
            "gzip" => flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .unwrap(),
            other => panic!("unexpected encoding {other}"),
        };
        out
    };
    for (accept, expected) in [
        ("br", "br"),
        ("zstd", "zstd"),
        ("gzip", "gzip"),
        // Ties: zstd first (as small as brotli for less CPU), then brotli.
        ("gzip, deflate, br, zstd", "zstd"),
        ("gzip, br", "br"),
        ("gzip, zstd", "zstd"),
        ("br;q=0.5, gzip", "gzip"),
        ("zstd;q=0.9, br;q=0.1", "zstd"),
        ("br, zstd;q=0.5", "br"),
    ] {
        let (encoding, vary, body) = fetch(Some(accept)).await;
        assert_eq!(encoding.as_deref(), Some(expected), "{accept}");
        assert!(
            vary.is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
            "{accept}"
        );
        assert!(
            body.len() < identity.len() / 3,
            "{accept}: {} bytes",
            body.len()
        );
        assert_eq!(decode(expected, &body), identity, "{accept}");
    }
    let (encoding, _, body) = fetch(Some("identity")).await;
    assert_eq!((encoding, body), (None, identity));
}

/// A compressed answer goes out in two writes (actix-web compresses a body
/// of more than 1 KB off the worker, so its head is written first). With
/// Nagle's algorithm the second write waited for the client's delayed ACK,
/// about 40 ms an answer on a kept-alive connection; the server sets
/// `TCP_NODELAY`. Twenty answers in a row take well under 20 × 40 ms.
#[tokio::test]
async fn compressed_answers_do_not_wait_for_an_ack() {
    let app = spawn_app(Backend::Sqlite).await;
    let get = || async {
        let res = app
            .client
            .get(app.url(&format!("{NET}/markets")))
            .header("X-API-Key", &app.token)
            .header("Accept-Encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-encoding"], "gzip");
        res.bytes().await.unwrap().len()
    };
    // The connection is opened and kept alive by the first answer.
    assert!(get().await > 1024, "a compressed body of more than 1 KB");
    let start = std::time::Instant::now();
    for _ in 0..20 {
        get().await;
    }
    let took = start.elapsed();
    assert!(
        took < std::time::Duration::from_millis(400),
        "20 compressed answers on one connection took {took:?}: each waited for an ACK"
    );
}

crate::on_both_backends!(
    encodings_are_negotiated,
    lists_are_served_as_csv_with_link_paging,
    the_access_log_has_a_line_per_answer,
    the_explorer_is_served_and_locked_to_its_origin,
    conditional_requests_and_freshness_headers,
    networks_lists_perpnet_with_asset_count,
    both_prefixes_answer_identically,
    markets_sort_and_order,
    market_fields_are_exact_strings_and_integers,
    market_detail_matches_list_and_resolves_symbols,
    whale_positions_order_limits_and_pages,
    some_positions_have_no_liquidation_price,
    wallets_filters_sorts_and_pages,
    unknown_and_repeated_parameters_are_rejected,
    liquidity_levels_windows_and_current_day,
    candles_intervals_windows_and_rollups,
    cross_endpoint_invariants_hold,
    authentication_is_required_except_on_public_routes,
    errors_are_problem_details,
    a_server_fault_is_a_generic_500_problem,
);
