//! Diesel schema shared by both backends (see the migrations for the types).

diesel::table! {
    use diesel::sql_types::*;
    snapshots (version) {
        version -> BigInt,
        source -> Text,
        observed_at -> Timestamp,
        created_at -> Timestamp,
        asset_count -> BigInt,
        wallet_count -> BigInt,
        position_count -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    markets (version, symbol) {
        version -> BigInt,
        symbol -> Text,
        price -> Dec,
        change24h_pct -> Dec,
        volume24h -> Dec,
        open_interest -> Dec,
        funding -> Dec,
        long_count -> BigInt,
        short_count -> BigInt,
        long_short_ratio -> Dec,
        long_liquidation_value -> Dec,
        short_liquidation_value -> Dec,
        total_liquidation_value -> Dec,
        bucket_size -> Dec,
        cohorts -> Text,
        current_levels -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    wallets (version, address) {
        version -> BigInt,
        address -> Text,
        label -> Nullable<Text>,
        tags -> Text,
        kols -> Text,
        kol_profile -> Nullable<Text>,
        size_class -> Text,
        direction -> Text,
        account_value -> Dec,
        total_value -> Dec,
        long_value -> Dec,
        short_value -> Dec,
        leverage -> Dec,
        position_count -> Integer,
        observed_at -> Timestamp,
        net_pnl -> Nullable<Dec>,
        roi -> Nullable<Dec>,
        win_rate -> Nullable<Dec>,
        strategy -> Nullable<Text>,
        strategy_confidence -> Nullable<Dec>,
        /// The wallet's open positions (JSON; see `held.rs`).
        positions -> Text,
    }
}

diesel::table! {
    /// The versions that stopped serving a wallet (see `validity.rs`).
    wallet_removals (version, address) {
        version -> BigInt,
        address -> Text,
    }
}

diesel::table! {
    /// The version up to which the wallet rows are compacted (one row).
    wallet_rows_compacted (id) {
        id -> Integer,
        through -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    liquidity_days (date, symbol) {
        date -> Date,
        symbol -> Text,
        coverage -> Text,
        bucket_size -> Dec,
        updated_at -> Timestamp,
        long_count -> BigInt,
        long_usd -> Dec,
        short_count -> BigInt,
        short_usd -> Dec,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    liquidity_levels (date, symbol, side, bucket_price) {
        date -> Date,
        symbol -> Text,
        side -> Text,
        bucket_price -> Dec,
        position_count -> BigInt,
        total_usd -> Dec,
        min_liq_price -> Dec,
        max_liq_price -> Dec,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    candles (symbol, resolution, open_time) {
        symbol -> Text,
        resolution -> Text,
        open_time -> BigInt,
        open -> Dec,
        high -> Dec,
        low -> Dec,
        close -> Dec,
        volume -> Dec,
        trades -> BigInt,
    }
}

diesel::table! {
    api_tokens (id) {
        id -> BigInt,
        name -> Text,
        token_hash -> Text,
        hint -> Text,
        created_at -> Timestamp,
        expires_at -> Nullable<Timestamp>,
        last_used_at -> Nullable<Timestamp>,
        revoked_at -> Nullable<Timestamp>,
        rate_limit_per_minute -> Nullable<Integer>,
    }
}

diesel::table! {
    token_usage (token_id, day, endpoint, status_class) {
        token_id -> BigInt,
        day -> Date,
        endpoint -> Text,
        status_class -> Text,
        count -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    scanned_wallets (address) {
        address -> Text,
        missed_scans -> Integer,
        last_seen_at -> Nullable<Timestamp>,
        first_seen_at -> Nullable<Timestamp>,
        first_account_value -> Nullable<Dec>,
        realized_pnl -> Dec,
        closed_count -> Integer,
        win_count -> Integer,
        held_scalper -> Integer,
        held_day -> Integer,
        held_swing -> Integer,
        held_position -> Integer,
        read_dexes -> Nullable<Text>,
        followed -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    wallet_registry (address) {
        address -> Text,
        sources -> Integer,
        first_seen_at -> Timestamp,
        leaderboard_value -> Nullable<Dec>,
        account_value -> Nullable<Dec>,
        position_value -> Nullable<Dec>,
        last_trade_at -> Nullable<Timestamp>,
        traded_notional -> Dec,
        dexes -> Text,
        last_read_at -> Nullable<Timestamp>,
        last_sweep_at -> Nullable<Timestamp>,
        empty_reads -> Integer,
        failed_reads -> Integer,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    /// Registry entries appended, merged into `wallet_registry` in bulk (`journal.rs`).
    wallet_registry_journal (seq) {
        seq -> BigInt,
        address -> Text,
        sources -> Integer,
        first_seen_at -> Timestamp,
        leaderboard_value -> Nullable<Dec>,
        account_value -> Nullable<Dec>,
        position_value -> Nullable<Dec>,
        last_trade_at -> Nullable<Timestamp>,
        traded_notional -> Dec,
        dexes -> Text,
        last_read_at -> Nullable<Timestamp>,
        last_sweep_at -> Nullable<Timestamp>,
        empty_reads -> Integer,
        failed_reads -> Integer,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::Dec;
    /// Scan states appended, merged into `scanned_wallets` in bulk (`journal.rs`).
    scanned_wallets_journal (seq) {
        seq -> BigInt,
        address -> Text,
        missed_scans -> Integer,
        last_seen_at -> Nullable<Timestamp>,
        first_seen_at -> Nullable<Timestamp>,
        first_account_value -> Nullable<Dec>,
        realized_pnl -> Dec,
        closed_count -> Integer,
        win_count -> Integer,
        held_scalper -> Integer,
        held_day -> Integer,
        held_swing -> Integer,
        held_position -> Integer,
        read_dexes -> Nullable<Text>,
        followed -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    version_freshness (version) {
        version -> BigInt,
        body -> Text,
        coverage -> Nullable<Text>,
    }
}

diesel::table! {
    history_points (hour, series, key, at) {
        hour -> BigInt,
        series -> Text,
        key -> Text,
        at -> BigInt,
        body -> Text,
    }
}

diesel::table! {
    history_points_journal (seq) {
        seq -> BigInt,
        hour -> BigInt,
        series -> Text,
        key -> Text,
        at -> BigInt,
        body -> Text,
    }
}

diesel::table! {
    history_hourly (series, key, hour) {
        series -> Text,
        key -> Text,
        hour -> BigInt,
        at -> BigInt,
        body -> Text,
    }
}

diesel::table! {
    position_events (at, address, symbol) {
        at -> BigInt,
        address -> Text,
        symbol -> Text,
        kind -> Text,
        value_micro -> BigInt,
        body -> Text,
        seq -> BigInt,
        /// The UTC hour of `at` (its start), epoch ms.
        hour -> BigInt,
    }
}

diesel::table! {
    position_events_journal (at, address, symbol) {
        at -> BigInt,
        address -> Text,
        symbol -> Text,
        kind -> Text,
        value_micro -> BigInt,
        body -> Text,
        seq -> BigInt,
        hour -> BigInt,
    }
}

diesel::table! {
    /// A view: `position_events` and its journal, side by side (an event is
    /// in one of them).
    position_events_all (at, address, symbol) {
        at -> BigInt,
        address -> Text,
        symbol -> Text,
        kind -> Text,
        value_micro -> BigInt,
        body -> Text,
        seq -> BigInt,
        hour -> BigInt,
    }
}

diesel::table! {
    event_sequence (id) {
        id -> Integer,
        last_seq -> BigInt,
        pruned_through -> BigInt,
    }
}

diesel::table! {
    webhook_endpoints (id) {
        id -> BigInt,
        url -> Text,
        secret -> Text,
        symbol -> Nullable<Text>,
        address -> Nullable<Text>,
        kind -> Nullable<Text>,
        min_value -> Nullable<Text>,
        created_at -> BigInt,
        disabled_at -> Nullable<BigInt>,
        disabled_reason -> Nullable<Text>,
        failing_since -> Nullable<BigInt>,
        next_attempt_at -> BigInt,
        claimed_by -> Nullable<Text>,
        claimed_until -> Nullable<BigInt>,
    }
}

diesel::table! {
    webhook_deliveries (id) {
        id -> BigInt,
        endpoint_id -> BigInt,
        message_id -> Text,
        event_type -> Text,
        event_seq -> Nullable<BigInt>,
        payload -> Text,
        state -> Text,
        created_at -> BigInt,
        attempts -> Integer,
        last_attempt_at -> Nullable<BigInt>,
        last_status -> Nullable<Integer>,
        last_error -> Nullable<Text>,
        delivered_at -> Nullable<BigInt>,
    }
}

diesel::joinable!(webhook_deliveries -> webhook_endpoints (endpoint_id));
diesel::table! {
    store_identity (id) {
        id -> Text,
    }
}

diesel::allow_tables_to_appear_in_same_query!(webhook_endpoints, webhook_deliveries);
diesel::allow_tables_to_appear_in_same_query!(wallet_registry, wallet_registry_journal);
diesel::allow_tables_to_appear_in_same_query!(wallets, wallet_removals);
