-- What the journals hold is merged into the tables first, so nothing saved is lost.
INSERT INTO wallet_registry
SELECT address, sources, first_seen_at, leaderboard_value, account_value,
       position_value, last_trade_at, traded_notional, dexes, last_read_at,
       last_sweep_at, empty_reads, failed_reads
FROM wallet_registry_journal
WHERE seq IN (SELECT max(seq) FROM wallet_registry_journal GROUP BY address)
ON CONFLICT (address) DO UPDATE SET
    sources = excluded.sources, first_seen_at = excluded.first_seen_at,
    leaderboard_value = excluded.leaderboard_value, account_value = excluded.account_value,
    position_value = excluded.position_value, last_trade_at = excluded.last_trade_at,
    traded_notional = excluded.traded_notional, dexes = excluded.dexes,
    last_read_at = excluded.last_read_at, last_sweep_at = excluded.last_sweep_at,
    empty_reads = excluded.empty_reads, failed_reads = excluded.failed_reads;
INSERT INTO scanned_wallets
SELECT address, missed_scans, last_seen_at, first_seen_at, first_account_value,
       realized_pnl, closed_count, win_count, held_scalper, held_day, held_swing,
       held_position, read_dexes, followed
FROM scanned_wallets_journal
WHERE seq IN (SELECT max(seq) FROM scanned_wallets_journal GROUP BY address)
ON CONFLICT (address) DO UPDATE SET
    missed_scans = excluded.missed_scans, last_seen_at = excluded.last_seen_at,
    first_seen_at = excluded.first_seen_at, first_account_value = excluded.first_account_value,
    realized_pnl = excluded.realized_pnl, closed_count = excluded.closed_count,
    win_count = excluded.win_count, held_scalper = excluded.held_scalper,
    held_day = excluded.held_day, held_swing = excluded.held_swing,
    held_position = excluded.held_position, read_dexes = excluded.read_dexes,
    followed = excluded.followed;
DROP TABLE scanned_wallets_journal;
DROP TABLE wallet_registry_journal;
