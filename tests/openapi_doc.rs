//! The checked-in OpenAPI document must equal what the code generates.

use std::path::PathBuf;

#[test]
fn checked_in_document_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../openapi/openapi.json");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = market_data_server::openapi::document_json();
    assert!(
        checked_in == generated,
        "openapi/openapi.json is out of date with the code.\nRegenerate it from the repository root with:\n    cargo run -q -- openapi > openapi/openapi.json"
    );
}

#[test]
fn every_operation_has_an_id_tag_summary_and_security() {
    let doc: serde_json::Value =
        serde_json::from_str(&market_data_server::openapi::document_json()).unwrap();
    let mut ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let ops = item.as_object().unwrap().iter();
        for (method, op) in ops.filter(|(key, _)| *key != "servers") {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
            assert!(
                op["tags"].as_array().is_some_and(|t| !t.is_empty()),
                "{id} has no tag"
            );
            assert!(op["summary"].is_string(), "{id} has no summary");
            assert!(
                op["description"].as_str().is_some_and(|d| d.len() > 20),
                "{id} has no description"
            );
            if path.starts_with("/v1/") {
                assert_eq!(
                    op["security"][0]["apiKey"],
                    serde_json::json!([]),
                    "{id} lacks the apiKey requirement"
                );
                assert!(
                    op["responses"]["401"].is_object(),
                    "{id} does not document 401"
                );
            }
        }
    }
    assert_eq!(
        ids.len(),
        14 + 2,
        "one operation per endpoint: 14 under /v1, plus healthz and readyz"
    );
}

/// The alias prefix is a server, not a second copy of every operation; the
/// health checks, served at the root only, say so at path level.
#[test]
fn the_alias_prefix_is_a_server_and_health_checks_override_it() {
    let doc: serde_json::Value =
        serde_json::from_str(&market_data_server::openapi::document_json()).unwrap();
    let urls = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["url"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(urls(&doc["servers"]), ["/", "/api/developer"]);
    for (path, item) in doc["paths"].as_object().unwrap() {
        assert!(!path.starts_with("/api/developer"), "{path} declared twice");
        if path.starts_with("/v1/") {
            assert!(item.get("servers").is_none(), "{path}");
        } else {
            assert_eq!(urls(&item["servers"]), ["/"], "{path}");
        }
    }
}

/// Enums and shared parameter types are named components: a schema with
/// `enum` appears once in the document, and every `$ref` resolves.
#[test]
fn enums_are_named_once_and_every_reference_resolves() {
    let doc: serde_json::Value =
        serde_json::from_str(&market_data_server::openapi::document_json()).unwrap();
    fn walk(v: &serde_json::Value, enums: &mut Vec<String>, refs: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(e) = map.get("enum") {
                    enums.push(e.to_string());
                }
                if let Some(r) = map.get("$ref").and_then(|r| r.as_str()) {
                    refs.push(r.to_owned());
                }
                map.values().for_each(|v| walk(v, enums, refs));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, enums, refs)),
            _ => {}
        }
    }
    let (mut enums, mut refs) = (Vec::new(), Vec::new());
    walk(&doc, &mut enums, &mut refs);
    let mut seen = std::collections::HashSet::new();
    for e in &enums {
        assert!(seen.insert(e), "the enum {e} is written more than once");
    }
    assert!(enums.len() >= 8, "{enums:?}");
    for r in &refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r}"));
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "{r} does not resolve"
        );
    }
    for param in [
        "NetworkId",
        "Interval",
        "HistoryInterval",
        "Cursor",
        "Amount",
    ] {
        assert!(
            refs.iter().any(|r| r.ends_with(param)),
            "{param} is not referenced"
        );
    }
}

/// The problem contract is declared once (`market_model::problem`): what the
/// server renders for every problem type validates against the document's
/// `Problem` schema, and the typed client reads it back as that type; every
/// problem example of the document is a known type with its own status.
#[test]
fn the_server_and_the_client_hold_to_the_documented_problem() {
    use market_client::{Problem, ProblemKind};
    use market_data_server::error::ApiError;

    let doc: serde_json::Value =
        serde_json::from_str(&market_data_server::openapi::document_json()).unwrap();
    let schema = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "$ref": "#/components/schemas/Problem",
    });
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    for &kind in ProblemKind::ALL {
        let error = match kind {
            ProblemKind::InvalidParameter => ApiError::param("limit", "must be at most 200"),
            _ => ApiError::new(kind, "What to change."),
        };
        let mut rendered = error.problem();
        rendered.instance = Some("/v1/networks".into());
        rendered.request_id = Some("5f0c6a3e9b7d4c21".into());
        let json = serde_json::to_value(&rendered).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&json)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{kind:?}: {errors:?}");
        let parsed: Problem = serde_json::from_value(json).unwrap();
        assert_eq!(parsed.kind(), Some(kind));
        assert_eq!(parsed, rendered);
        assert_eq!(
            actix_web::ResponseError::status_code(&error).as_u16(),
            kind.status()
        );
    }
    let mut examples = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (status, response) in item["get"]["responses"].as_object().unwrap() {
            let Some(example) = response["content"][market_model::PROBLEM_JSON].get("example")
            else {
                continue;
            };
            let problem: Problem = serde_json::from_value(example.clone()).unwrap();
            let kind = problem
                .kind()
                .unwrap_or_else(|| panic!("{path} {status}: unknown type"));
            assert_eq!(kind.status().to_string(), *status, "{path}");
            assert_eq!(problem.title, kind.title(), "{path} {status}");
            examples += 1;
        }
    }
    assert!(examples > 100, "{examples} problem examples");
}
