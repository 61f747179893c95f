-- What the journals hold is merged into the tables first, so nothing saved is lost.
INSERT INTO wallet_registry
SELECT address, sources, first_seen_at, leaderboard_value, account_value,
       position_value, last_trade_at, traded_notional, dexes, last_read_at,
       last_sweep_at, empty_reads, failed_reads
FROM wallet_registry_journal
WHERE seq IN (SELECT max(seq) FROM wallet_registry_journal GROUP BY address)
ON CONFLICT (address) DO UPDATE SET
    sources = EXCLUDED.sources, first_seen_at = EXCLUDED.first_seen_at,
    leaderboard_value = EXCLUDED.leaderboard_value, account_value = EXCLUDED.account_value,
    position_value = EXCLUDED.position_value, last_trade_at = EXCLUDED.last_trade_at,
    traded_notional = EXCLUDED.traded_notional, dexes = EXCLUDED.dexes,
    last_read_at = EXCLUDED.last_read_at, last_sweep_at = EXCLUDED.last_sweep_at,
    empty_reads = EXCLUDED.empty_reads, failed_reads = EXCLUDED.failed_reads;
INSERT INTO scanned_wallets
SELECT address, missed_scans, last_seen_at, first_seen_at, first_account_value,
       realized_pnl, closed_count, win_count, held_scalper, held_day, held_swing,
       held_position, read_dexes, followed
FROM scanned_wallets_journal
WHERE seq IN (SELECT max(seq) FROM scanned_wallets_journal GROUP BY address)
ON CONFLICT (address) DO UPDATE SET
    missed_scans = EXCLUDED.missed_scans, last_seen_at = EXCLUDED.last_seen_at,
    first_seen_at = EXCLUDED.first_seen_at, first_account_value = EXCLUDED.first_account_value,
    realized_pnl = EXCLUDED.realized_pnl, closed_count = EXCLUDED.closed_count,
    win_count = EXCLUDED.win_count, held_scalper = EXCLUDED.held_scalper,
    held_day = EXCLUDED.held_day, held_swing = EXCLUDED.held_swing,
    held_position = EXCLUDED.held_position, read_dexes = EXCLUDED.read_dexes,
    followed = EXCLUDED.followed;
DROP TABLE scanned_wallets_journal;
DROP TABLE wallet_registry_journal;
