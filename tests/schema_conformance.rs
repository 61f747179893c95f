//! Every response of the running server validates against the served OpenAPI document.

use serde_json::{json, Value};

use crate::support::{enc, spawn_app, Backend, TestApp};

/// The validator for one operation's response schema, with the document's
/// components available for `$ref`s (OpenAPI 3.1 schemas are JSON Schema 2020-12).
fn validator(doc: &Value, path: &str, status: &str, media: &str) -> jsonschema::Validator {
    let schema = &doc["paths"][path]["get"]["responses"][status]["content"][media]["schema"];
    assert!(schema.is_object(), "{path} {status} {media} has no schema");
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "allOf": [schema],
    });
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&root)
        .unwrap()
}

async fn check(app: &TestApp, doc: &Value, template: &str, url: &str, checked: &mut usize) {
    let res = app.request(url, Some(("X-API-Key", &app.token))).await;
    let status = res.status().as_u16().to_string();
    let media = res.headers()["content-type"].to_str().unwrap().to_owned();
    let body: Value = res.json().await.unwrap();
    assert!(
        doc["paths"][template]["get"]["responses"][&status].is_object(),
        "{url}: status {status} is not documented"
    );
    let v = validator(doc, template, &status, &media);
    let errors: Vec<String> = v
        .iter_errors(&body)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .take(5)
        .collect();
    assert!(
        errors.is_empty(),
        "{url} ({status}) does not match its schema: {errors:#?}"
    );
    *checked += 1;
}

async fn every_response_validates_against_the_document(backend: Backend) {
    let app = spawn_app(backend).await;
    let doc: Value = app
        .request("/api-docs/openapi.json", None)
        .await
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let today = app.today();
    let week = today - time::Duration::days(6);
    let markets = app.get_ok("/v1/networks/perpnet/markets").await;
    let symbols: Vec<String> = markets["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["symbol"].as_str().unwrap().to_owned())
        .collect();
    let mut checked = 0;
    // One operation per endpoint under `/v1`; the document's servers say
    // where else it is served (the alias prefix): every case on each.
    let servers: Vec<String> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap().trim_end_matches('/').to_owned())
        .collect();
    assert_eq!(servers, ["", "/api/developer"]);
    for server in &servers {
        let t = |p: &str| format!("/v1{p}");
        let mut cases: Vec<(String, String)> = vec![
            (t("/networks"), t("/networks")),
            (
                t("/networks/{network}/markets"),
                t("/networks/perpnet/markets"),
            ),
            (
                t("/networks/{network}/markets"),
                t("/networks/perpnet/markets?sort=change24hPct&order=asc"),
            ),
            (
                t("/networks/{network}/wallets"),
                t("/networks/perpnet/wallets?limit=200"),
            ),
            (
                t("/networks/{network}/wallets"),
                t("/networks/perpnet/wallets?sort=netPnl&order=asc&limit=200"),
            ),
            (
                t("/networks/{network}/wallets"),
                t("/networks/perpnet/wallets?size=whale&direction=short"),
            ),
            (
                t("/networks/{network}/liquidity-levels"),
                t(&format!(
                    "/networks/perpnet/liquidity-levels?fromDate={week}&toDate={today}&limit=500"
                )),
            ),
            (
                t("/networks/{network}/wallets"),
                t("/networks/perpnet/wallets?limit=0"),
            ),
            (
                t("/networks/{network}/markets/{asset}"),
                t("/networks/perpnet/markets/NOPE"),
            ),
            (
                t("/networks/{network}/coverage"),
                t("/networks/perpnet/coverage"),
            ),
            (
                t("/networks/{network}/position-events"),
                t("/networks/perpnet/position-events?limit=500"),
            ),
            (
                t("/networks/{network}/position-events"),
                t("/networks/perpnet/position-events?kind=bogus"),
            ),
            (
                t("/networks/{network}/wallets/{address}"),
                t("/networks/perpnet/wallets/0x12"),
            ),
            (
                t("/networks/{network}/wallets/{address}"),
                t("/networks/perpnet/wallets/0x0000000000000000000000000000000000000000"),
            ),
        ];
        let wallets = app.get_ok(&t("/networks/perpnet/wallets?limit=40")).await;
        for w in wallets["items"].as_array().unwrap().iter().step_by(4) {
            let a = w["address"].as_str().unwrap();
            cases.push((
                t("/networks/{network}/wallets/{address}"),
                t(&format!("/networks/perpnet/wallets/{a}")),
            ));
            cases.push((
                t("/networks/{network}/wallets/{address}/history"),
                t(&format!(
                    "/networks/perpnet/wallets/{a}/history?interval=5m&limit=5000"
                )),
            ));
        }
        for sym in symbols.iter().step_by(9) {
            let s = enc(sym);
            cases.push((
                t("/networks/{network}/markets/{asset}"),
                t(&format!("/networks/perpnet/markets/{s}")),
            ));
            cases.push((
                t("/networks/{network}/markets/{asset}/whale-positions"),
                t(&format!(
                    "/networks/perpnet/markets/{s}/whale-positions?limit=200"
                )),
            ));
            cases.push((
                t("/networks/{network}/markets/{asset}/cohorts"),
                t(&format!("/networks/perpnet/markets/{s}/cohorts")),
            ));
            cases.push((
                t("/networks/{network}/markets/{asset}/history"),
                t(&format!(
                    "/networks/perpnet/markets/{s}/history?interval=15m&limit=100"
                )),
            ));
            for interval in ["1h", "15m", "1d", "1M"] {
                cases.push((
                    t("/networks/{network}/markets/{asset}/candles"),
                    t(&format!(
                        "/networks/perpnet/markets/{s}/candles?interval={interval}"
                    )),
                ));
            }
        }
        for (template, url) in &cases {
            check(
                &app,
                &doc,
                template,
                &format!("{server}{url}"),
                &mut checked,
            )
            .await;
        }
    }
    for (template, url) in [("/healthz", "/healthz"), ("/readyz", "/readyz")] {
        check(&app, &doc, template, url, &mut checked).await;
    }
    assert!(checked > 100, "checked {checked} responses");
}

#[test]
fn the_documented_examples_validate_against_their_schemas() {
    let doc: Value = serde_json::from_str(&market_data_server::openapi::document_json()).unwrap();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (status, response) in item["get"]["responses"].as_object().unwrap() {
            for (media, content) in response["content"].as_object().into_iter().flatten() {
                let example = &content["example"];
                assert!(!example.is_null(), "{path} {status} has no example");
                let v = validator(&doc, path, status, media);
                let errors: Vec<String> = v
                    .iter_errors(example)
                    .map(|e| format!("{} at {}", e, e.instance_path))
                    .collect();
                assert!(errors.is_empty(), "example of {path} {status}: {errors:#?}");
                checked += 1;
            }
        }
    }
    assert!(checked > 50);
}

crate::on_both_backends!(every_response_validates_against_the_document,);
