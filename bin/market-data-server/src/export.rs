//! The CSV representation of the list answers (`Accept: text/csv`), and the
//! negotiation between it and JSON.
//!
//! A CSV answer is the same page as the JSON one (same parameters, limits
//! and cursor), rendered from it: one row per item (per level for the
//! liquidity days, each row carrying its day's fields), RFC 4180 with a
//! header row and CRLF line ends. The columns come from the item's schema
//! in the OpenAPI document, so they follow the model: the required fields
//! in their declared order, then the optional ones by name; nested objects
//! become dotted columns (`kolProfile.name`), lists of scalars one cell
//! joined by `;`, other lists one cell of compact JSON, and null an empty
//! cell. Decimals are the JSON strings, unchanged.

use std::collections::HashMap;
use std::sync::LazyLock;

use actix_web::http::header;
use actix_web::HttpRequest;
use bytes::Bytes;
use serde_json::Value;

/// The media type of a CSV answer.
pub const TEXT_CSV: &str = "text/csv; charset=utf-8; header=present";

/// The lists served as CSV too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum List {
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
    pub const ALL: [List; 8] = [
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
        self != List::Markets
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

/// The representation `Accept` prefers: CSV when `text/csv` (or `text/*`)
/// has a higher quality than JSON, or the same quality while JSON is only
/// admitted by a wildcard (`text/csv, */*`). Everything else is JSON,
/// including no `Accept` at all.
pub fn wanted(req: &HttpRequest) -> Representation {
    let (mut json, mut json_named, mut csv) = (0.0f32, false, 0.0f32);
    for value in req.headers().get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| {
                    let p = p.trim();
                    p.strip_prefix("q=").or_else(|| p.strip_prefix("Q="))
                })
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/json" | "application/problem+json" => {
                    json = json.max(q);
                    json_named |= q > 0.0;
                }
                "application/*" | "*/*" => json = json.max(q),
                "text/csv" | "text/*" => csv = csv.max(q),
                _ => {}
            }
        }
    }
    if csv > 0.0 && (csv > json || (csv == json && !json_named)) {
        Representation::Csv
    } else {
        Representation::Json
    }
}

/// One column: its header and where its cell is in a row (and, for nested
/// rows, whether it is the parent's).
struct Column {
    header: String,
    path: Vec<String>,
    parent: bool,
}

/// Every list's columns, from the OpenAPI document's schemas.
static COLUMNS: LazyLock<HashMap<List, Vec<Column>>> = LazyLock::new(|| {
    let doc = serde_json::to_value(crate::openapi::operations()).expect("the operations serialize");
    let schemas = &doc["components"]["schemas"];
    List::ALL
        .into_iter()
        .map(|list| {
            let (_, row, nested) = list.shape();
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
                for sub in row[field].as_array().into_iter().flatten() {
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
        if !pair.is_empty() && pair != "cursor" && !pair.starts_with("cursor=") {
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

    fn accept(value: &str) -> Representation {
        wanted(
            &TestRequest::default()
                .insert_header((header::ACCEPT, value))
                .to_http_request(),
        )
    }

    #[test]
    fn csv_is_chosen_only_when_preferred() {
        assert_eq!(
            wanted(&TestRequest::default().to_http_request()),
            Representation::Json
        );
        assert_eq!(accept("text/csv"), Representation::Csv);
        assert_eq!(accept("text/csv, */*"), Representation::Csv);
        assert_eq!(
            accept("text/csv;q=0.5, application/json"),
            Representation::Json
        );
        assert_eq!(accept("application/json, text/csv"), Representation::Json);
        assert_eq!(
            accept("application/json;q=0.2, text/csv"),
            Representation::Csv
        );
        assert_eq!(accept("*/*"), Representation::Json);
        assert_eq!(accept("text/csv;q=0"), Representation::Json);
        assert_eq!(
            accept("text/html, text/*;q=0.8, */*;q=0.1"),
            Representation::Csv
        );
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
            assert!(h.len() >= 5, "{list:?}: {h:?}");
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
