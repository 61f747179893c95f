//! The CSV representation of the list answers (`Accept: text/csv`), and the
//! negotiation between it and JSON.
//!
//! A CSV answer is the same page as the JSON one (same parameters, limits
//! and cursor), rendered from it: one row per item (per level for the
//! liquidity days, each row carrying its day's fields), RFC 4180 with a
//! header row and CRLF line ends. The columns come from the item's schema
//! (the one the OpenAPI document holds, collected from the model here: see
//! `RowSchemas`), so they follow the model: the required fields
//! in their declared order, then the optional ones by name; nested objects
//! become dotted columns (`kolProfile.name`), lists of scalars one cell
//! joined by `;`, other lists one cell of compact JSON, and null an empty
//! cell. Decimals are the JSON strings, unchanged.
//!
//! It also builds the `Link: <…>; rel="next"` header of every paged list,
//! JSON or CSV.

use std::collections::HashMap;
use std::sync::LazyLock;

use actix_web::http::header;
use actix_web::HttpRequest;
use bytes::Bytes;
use serde_json::Value;
use utoipa::OpenApi;

/// The media type of a CSV answer.
pub const TEXT_CSV: &str = "text/csv; charset=utf-8; header=present";

/// The lists served as CSV too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum List {
    /// `/networks`.
    Networks,
    /// `/markets`.
    Markets,
    /// `/markets/{asset}/whale-positions`.
    Positions,
    /// `/wallets`.
    Wallets,
    /// `/position-events`.
    Events,
    /// `/markets/{asset}/history`.
    MarketHistory,
    /// `/wallets/{address}/history`.
    WalletHistory,
    /// `/markets/{asset}/candles`.
    Candles,
    /// `/liquidity-levels`: one row per level.
    Liquidity,
}

impl List {
    /// Every list.
    pub const ALL: [List; 9] = [
        List::Networks,
        List::Markets,
        List::Positions,
        List::Wallets,
        List::Events,
        List::MarketHistory,
        List::WalletHistory,
        List::Candles,
        List::Liquidity,
    ];

    /// The operation serving the list.
    pub fn operation_id(self) -> &'static str {
        match self {
            List::Networks => "listNetworks",
            List::Markets => "listMarkets",
            List::Positions => "listMarketPositions",
            List::Wallets => "listWallets",
            List::Events => "listPositionEvents",
            List::MarketHistory => "getMarketHistory",
            List::WalletHistory => "getWalletHistory",
            List::Candles => "listCandles",
            List::Liquidity => "listLiquidityLevels",
        }
    }

    /// Whether its answers are keyset-paged (a `nextCursor`, a `Link`).
    pub fn paged(self) -> bool {
        !matches!(self, List::Markets)
    }

    /// The list served by operation `id`.
    pub fn of_operation(id: &str) -> Option<List> {
        List::ALL.into_iter().find(|l| l.operation_id() == id)
    }

    /// (the answer's field holding the rows, the row schema, and for
    /// nested rows the row's field holding them and their schema).
    fn shape(
        self,
    ) -> (
        &'static str,
        &'static str,
        Option<(&'static str, &'static str)>,
    ) {
        match self {
            List::Networks => ("items", "NetworkItem", None),
            List::Markets => ("items", "Market", None),
            List::Positions => ("items", "MarketPosition", None),
            List::Wallets => ("items", "Wallet", None),
            List::Events => ("items", "PositionEvent", None),
            List::MarketHistory => ("items", "MarketHistoryPoint", None),
            List::WalletHistory => ("items", "WalletHistoryPoint", None),
            List::Candles => ("candles", "Candle", None),
            List::Liquidity => ("items", "LiquidityDay", Some(("levels", "Level"))),
        }
    }
}

/// Which representation a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    /// `application/json` (also for `*/*` and no `Accept`).
    Json,
    /// `text/csv`.
    Csv,
}

/// The quality `Accept` gives a media type: that of the most specific
/// range matching it (RFC 9110 §12.5.1: `text/csv;q=0, text/*` refuses
/// CSV), 0 when none matches, 1 without an `Accept` header; and how
/// specific that range was: 2 the type itself, 1 `type/*`, 0 `*/*`.
fn quality(req: &HttpRequest, kind: &str, sub: &str) -> (f32, u8) {
    let mut values = req.headers().get_all(header::ACCEPT).peekable();
    if values.peek().is_none() {
        return (1.0, 0);
    }
    // (specificity, q): 2 the type itself, 1 `type/*`, 0 `*/*`.
    let mut best: Option<(u8, f32)> = None;
    let mut any = false;
    for value in values {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            if media.is_empty() {
                continue;
            }
            any = true;
            let q = parts
                .filter_map(|p| {
                    let p = p.trim();
                    p.strip_prefix("q=").or_else(|| p.strip_prefix("Q="))
                })
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0)
                .clamp(0.0, 1.0);
            let (k, s) = media.split_once('/').unwrap_or((media.as_str(), ""));
            let specificity = match (k, s) {
                _ if k == kind && s == sub => 2,
                _ if k == kind && s == "*" => 1,
                ("*", "*") => 0,
                _ => continue,
            };
            // The most specific range wins; of equally specific ones, the higher q.
            best = match best {
                Some((b, bq)) if b > specificity || (b == specificity && bq >= q) => best,
                _ => Some((specificity, q)),
            };
        }
    }
    if !any {
        // `Accept:` with nothing in it: as if absent.
        return (1.0, 0);
    }
    best.map_or((0.0, 0), |(s, q)| (q, s))
}

/// The representation to answer with: CSV (on a list, `csv`) when `text/csv`
/// has a higher quality than JSON, or the same while JSON is only admitted
/// by a wildcard (`text/csv, */*`); else JSON while `Accept` admits it
/// (without `Accept`, and for `*/*`, it does); `None` (a 406) when it
/// admits neither.
pub fn negotiate(req: &HttpRequest, csv: bool) -> Option<Representation> {
    let (json, json_named) = {
        let (q, specificity) = quality(req, "application", "json");
        // Clients that name the problem type take JSON answers too.
        let (problem, problem_specificity) = quality(req, "application", "problem+json");
        let problem = if problem_specificity == 2 {
            problem
        } else {
            0.0
        };
        (q.max(problem), specificity == 2 || problem > 0.0)
    };
    let (csv_q, csv_specificity) = quality(req, "text", "csv");
    // `*/*` alone never asks for CSV.
    let csv_asked = csv && csv_q > 0.0 && csv_specificity >= 1;
    if csv_asked && (csv_q > json || (csv_q == json && !json_named)) {
        Some(Representation::Csv)
    } else if json > 0.0 {
        Some(Representation::Json)
    } else if csv_asked {
        Some(Representation::Csv)
    } else {
        None
    }
}

/// One column: its header and where its cell is in a row (and, for nested
/// rows, whether it is the parent's).
struct Column {
    header: String,
    path: Vec<String>,
    parent: bool,
}

/// The row schemas of the lists (with the schemas they reference): the
/// same components the OpenAPI document holds, collected from the model
/// here so that rendering a CSV needs no document.
#[derive(OpenApi)]
#[openapi(components(schemas(
    market_model::NetworkItem,
    market_model::Market,
    market_model::MarketPosition,
    market_model::Wallet,
    market_model::PositionEvent,
    market_model::MarketHistoryPoint,
    market_model::WalletHistoryPoint,
    market_model::Candle,
    market_model::LiquidityDay,
    market_model::Level,
)))]
pub(crate) struct RowSchemas;

/// Every list's columns, from its row schema (the document's, see
/// [`RowSchemas`]).
static COLUMNS: LazyLock<HashMap<List, Vec<Column>>> = LazyLock::new(|| {
    let doc = serde_json::to_value(RowSchemas::openapi()).expect("the schemas serialize");
    let schemas = &doc["components"]["schemas"];
    List::ALL
        .into_iter()
        .map(|list| {
            let (_, row, nested) = list.shape();
            // A row type missing from `RowSchemas` would be one nameless column.
            assert!(schemas[row].is_object(), "{row} is not in RowSchemas");
            if let Some((_, schema)) = nested {
                assert!(schemas[schema].is_object(), "{schema} is not in RowSchemas");
            }
            let mut columns = Vec::new();
            let skip = nested.map(|(field, _)| field);
            flatten(
                schemas,
                &schemas[row],
                &mut Vec::new(),
                skip,
                true,
                &mut columns,
            );
            if let Some((_, schema)) = nested {
                flatten(
                    schemas,
                    &schemas[schema],
                    &mut Vec::new(),
                    None,
                    false,
                    &mut columns,
                );
            }
            (list, columns)
        })
        .collect()
});

/// The schema `s` refers to (through `$ref`, or the non-null branch of a
/// nullable `oneOf`).
fn resolve<'a>(schemas: &'a Value, s: &'a Value) -> &'a Value {
    if let Some(name) = s["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        return resolve(schemas, &schemas[name]);
    }
    if let Some(branches) = s["oneOf"].as_array() {
        if let Some(b) = branches.iter().find(|b| b["type"] != "null") {
            return resolve(schemas, b);
        }
    }
    s
}

fn flatten(
    schemas: &Value,
    schema: &Value,
    path: &mut Vec<String>,
    skip: Option<&str>,
    parent: bool,
    out: &mut Vec<Column>,
) {
    let schema = resolve(schemas, schema);
    let Some(properties) = schema["properties"].as_object() else {
        out.push(Column {
            header: path.join("."),
            path: path.clone(),
            parent,
        });
        return;
    };
    // Required fields in their declared order, then the optional ones.
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let optional = properties
        .keys()
        .map(String::as_str)
        .filter(|k| !required.contains(k));
    for name in required.iter().copied().chain(optional) {
        if Some(name) == skip {
            continue;
        }
        path.push(name.to_owned());
        flatten(schemas, &properties[name], path, None, parent, out);
        path.pop();
    }
}

/// The text of one cell.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.iter().all(|v| !v.is_object() && !v.is_array()) => items
            .iter()
            .map(|v| cell(Some(v)))
            .collect::<Vec<_>>()
            .join(";"),
        Some(v @ (Value::Array(_) | Value::Object(_))) => v.to_string(),
        Some(v) => v.to_string(),
    }
}

fn lookup<'a>(row: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(row, |v, key| v.get(key))
}

/// The header row of `list` (its column names).
pub fn headers(list: List) -> Vec<&'static str> {
    COLUMNS[&list].iter().map(|c| c.header.as_str()).collect()
}

/// `json` (a rendered answer of `list`) as CSV.
pub fn render(list: List, json: &[u8]) -> Result<Bytes, serde_json::Error> {
    let answer: Value = serde_json::from_slice(json)?;
    let (rows, _, nested) = list.shape();
    let columns = &COLUMNS[&list];
    let mut out = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::with_capacity(json.len()));
    let write = |out: &mut csv::Writer<Vec<u8>>, record: Vec<String>| {
        out.write_record(&record).expect("writing to memory");
    };
    write(&mut out, columns.iter().map(|c| c.header.clone()).collect());
    for row in answer[rows].as_array().into_iter().flatten() {
        match nested {
            None => write(
                &mut out,
                columns.iter().map(|c| cell(lookup(row, &c.path))).collect(),
            ),
            Some((field, _)) => {
                let subs = row[field].as_array().map(Vec::as_slice).unwrap_or_default();
                // A row without sub-rows (a day without levels) still has
                // its own fields: one row, its sub-row columns empty.
                let none = [Value::Null];
                for sub in if subs.is_empty() { &none[..] } else { subs } {
                    let record = columns
                        .iter()
                        .map(|c| cell(lookup(if c.parent { row } else { sub }, &c.path)))
                        .collect();
                    write(&mut out, record);
                }
            }
        }
    }
    Ok(Bytes::from(out.into_inner().expect("writing to memory")))
}

/// The `nextCursor` of a rendered list answer: the renderers write it among
/// the answer's last members, after the rows, so only the tail is read.
/// (A `"nextCursor":` in a JSON text can only be a member name: quotes
/// inside strings are escaped.)
pub fn next_cursor(json: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"nextCursor\":\"";
    let tail = &json[json.len().saturating_sub(1024)..];
    let at = memchr::memmem::rfind(tail, KEY)? + KEY.len();
    let len = memchr::memchr(b'"', &tail[at..])?;
    std::str::from_utf8(&tail[at..at + len]).ok()
}

/// The `Link: <…>; rel="next"` of a page whose next cursor is `cursor`:
/// this request with `cursor` replaced (RFC 8288; a reference relative to
/// the request's own URL, so it holds behind a proxy that keeps paths). The
/// other parameters keep the caller's own spelling; cursors are URL-safe
/// (base64url or digits).
pub fn next_link(req: &HttpRequest, cursor: &str) -> Option<header::HeaderValue> {
    let mut link = String::with_capacity(
        req.uri().path().len() + req.query_string().len() + cursor.len() + 24,
    );
    link.push('<');
    link.push_str(req.path());
    link.push('?');
    for pair in req.query_string().split('&') {
        // By its decoded name, as the query parser reads it (`curs%6Fr`).
        let is_cursor = form_urlencoded::parse(pair.as_bytes())
            .next()
            .is_some_and(|(k, _)| k == "cursor");
        if !pair.is_empty() && !is_cursor {
            link.push_str(pair);
            link.push('&');
        }
    }
    link.push_str("cursor=");
    link.push_str(cursor);
    link.push_str(">; rel=\"next\"");
    // A request target is visible ASCII, so this holds; were it not, the
    // answer would go without its Link rather than fail.
    header::HeaderValue::from_str(&link).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn accept(value: &str, csv: bool) -> Option<Representation> {
        negotiate(
            &TestRequest::default()
                .insert_header((header::ACCEPT, value))
                .to_http_request(),
            csv,
        )
    }

    #[test]
    fn csv_is_chosen_only_when_preferred_and_json_otherwise_when_acceptable() {
        use Representation::{Csv, Json};
        assert_eq!(
            negotiate(&TestRequest::default().to_http_request(), true),
            Some(Json)
        );
        assert_eq!(accept("text/csv", true), Some(Csv));
        assert_eq!(accept("text/csv, */*", true), Some(Csv));
        assert_eq!(accept("text/csv;q=0.5, application/json", true), Some(Json));
        assert_eq!(accept("application/json, text/csv", true), Some(Json));
        assert_eq!(accept("application/json;q=0.2, text/csv", true), Some(Csv));
        assert_eq!(accept("*/*", true), Some(Json));
        assert_eq!(accept("text/csv;q=0", true), None);
        assert_eq!(
            accept("text/html, text/*;q=0.8, */*;q=0.1", true),
            Some(Csv)
        );
        // The most specific range decides.
        assert_eq!(accept("text/csv;q=0, text/*", true), None);
        assert_eq!(accept("text/csv;q=0, text/*, */*;q=0.5", true), Some(Json));
        assert_eq!(
            accept("text/csv;q=0.1, text/*;q=0.9, application/json;q=0.5", true),
            Some(Json)
        );
        assert_eq!(
            accept("application/json;q=0.1, */*, text/csv;q=0.5", true),
            Some(Csv)
        );
        // Not a list: JSON whenever it is acceptable, else a 406.
        assert_eq!(accept("text/csv, */*", false), Some(Json));
        assert_eq!(accept("text/*, */*;q=0.5", false), Some(Json));
        assert_eq!(accept("text/csv", false), None);
        assert_eq!(accept("", false), Some(Json));
    }

    #[test]
    fn the_next_cursor_is_read_from_the_tail() {
        let page = br#"{"items":[{"label":"say \"nextCursor\":\"x\""}],"nextCursor":"eyJxIjo","coverage":"scanned_wallets"}"#;
        assert_eq!(next_cursor(page), Some("eyJxIjo"));
        assert_eq!(next_cursor(br#"{"items":[],"nextCursor":null}"#), None);
        let long = format!(r#"{{"items":["{}"],"nextCursor":"abc"}}"#, "a".repeat(5000));
        assert_eq!(next_cursor(long.as_bytes()), Some("abc"));
    }

    #[test]
    fn the_link_replaces_the_cursor_and_keeps_the_rest() {
        let req =
            TestRequest::with_uri("/v1/networks/perpnet/wallets?size=whale&cursor=old&limit=200")
                .to_http_request();
        assert_eq!(
            next_link(&req, "new-_1").unwrap().to_str().unwrap(),
            "</v1/networks/perpnet/wallets?size=whale&limit=200&cursor=new-_1>; rel=\"next\""
        );
    }

    #[test]
    fn a_day_without_levels_is_one_row_with_its_own_fields() {
        let answer = br#"{"items":[{"date":"2026-11-01","network":"perpnet","canonicalAsset":"BTC","levels":[]},
            {"date":"2026-11-02","network":"perpnet","canonicalAsset":"BTC","levels":[{"side":"long","bucketPrice":"1000"},{"side":"short","bucketPrice":"2000"}]}],"nextCursor":null}"#;
        let csv = String::from_utf8(render(List::Liquidity, answer).unwrap().to_vec()).unwrap();
        let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 4, "{csv}");
        let h = headers(List::Liquidity);
        let side = h.iter().position(|c| *c == "side").unwrap();
        let first: Vec<&str> = lines[1].split(',').collect();
        assert_eq!((first[0], first[side]), ("2026-11-01", ""));
        let second: Vec<&str> = lines[2].split(',').collect();
        assert_eq!((second[0], second[side]), ("2026-11-02", "long"));
    }

    #[test]
    fn cells_are_plain_text() {
        assert_eq!(cell(None), "");
        assert_eq!(cell(Some(&Value::Null)), "");
        assert_eq!(cell(Some(&serde_json::json!("0.00000001"))), "0.00000001");
        assert_eq!(
            cell(Some(&serde_json::json!(["kol", "whale"]))),
            "kol;whale"
        );
        assert_eq!(cell(Some(&serde_json::json!(12))), "12");
        assert_eq!(cell(Some(&serde_json::json!(true))), "true");
        assert_eq!(
            cell(Some(&serde_json::json!([{"name": "a"}]))),
            r#"[{"name":"a"}]"#
        );
    }

    #[test]
    fn every_list_has_columns_and_liquidity_rows_carry_their_day() {
        for list in List::ALL {
            let h = headers(list);
            assert!(h.len() >= 3, "{list:?}: {h:?}");
            let unique: std::collections::HashSet<_> = h.iter().collect();
            assert_eq!(unique.len(), h.len(), "{list:?}: duplicate columns {h:?}");
        }
        let h = headers(List::Liquidity);
        assert_eq!(h[0], "date");
        assert!(
            h.contains(&"bucketPrice") && h.contains(&"totals.long.totalAmountUsd"),
            "{h:?}"
        );
        assert!(!h.contains(&"levels"));
        assert_eq!(headers(List::Positions)[0], "address");
    }
}
