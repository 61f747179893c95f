#!/usr/bin/env python3
"""Checks a webhook receiver's log (tests/webhooks/receiver.py) against the
outbox (`webhook deliveries ID --json`) and the phase marks of
scripts/bench-webhooks.sh, and prints the figures.

    scripts/webhook-report.py RECEIVED.jsonl DELIVERIES.json MARKS.txt
"""

import json
import sys
from datetime import datetime


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


def main():
    rx = [json.loads(line) for line in open(sys.argv[1])]
    deliveries = json.load(open(sys.argv[2]))
    marks = {}
    for line in open(sys.argv[3]):
        parts = line.split()
        marks[parts[0]] = float(parts[1])
        if len(parts) > 3:
            marks[parts[2]] = float(parts[3])
    events = [d for d in deliveries if d["type"] == "position-event"]
    print(f"messages enqueued: {len(events)}; states: "
          + ", ".join(f"{s} {sum(d['state'] == s for d in events)}" for s in ("delivered", "pending")))
    received = [r for r in rx if r["type"] == "position-event"]
    print(f"requests received: {len(received)}, unverified by standardwebhooks: {sum(not r['verified'] for r in received)}")
    ids = {d["messageId"] for d in events}
    got = {r["webhookId"] for r in received}
    print(f"lost (enqueued, never received): {len(ids - got)}; received but not enqueued: {len(got - ids)}")
    first, seen, repeats = [], set(), []
    for i, r in enumerate(received):
        if r["webhookId"] in seen:
            repeats.append(r)
        else:
            seen.add(r["webhookId"])
            first.append(r["eventId"])
    in_order = all(a < b for a, b in zip(first, first[1:]))
    by_outbox = [d["eventId"] for d in sorted(events, key=lambda d: d["id"])]
    print(f"in order (first arrivals by event id): {in_order}; the outbox's order: {first == by_outbox}")
    kill = marks.get("kill")
    print(f"repeated webhook-ids: {len(repeats)}"
          + (f" ({sum(r['receivedAt'] >= kill for r in repeats)} after the kill)" if kill else ""))
    if kill:
        before = int(marks["received_before"])
        acked_before = {r["webhookId"] for r in rx[:before]}
        # The last message received before the kill may have been in flight
        # (taken, not yet recorded): it is the one allowed to come again.
        last_before = rx[before - 1]["webhookId"] if before else None
        again = [r["webhookId"] for r in repeats if r["webhookId"] in acked_before]
        print(f"received before the kill and again after it: {len(again)}"
              f" (of which the message in flight at the kill: {sum(i == last_before for i in again)})")
    lo, hi = marks["steady_from"], marks["steady_to"]
    steady = [r for r in received if lo <= r["receivedAt"] < hi]
    enqueued = {d["messageId"]: ts(d["createdAt"]) for d in events}
    lag = [r["receivedAt"] - enqueued[r["webhookId"]] for r in steady]
    print(f"steady phase: {len(steady) * 60 / (hi - lo):.0f} deliveries a minute over {hi - lo:.0f} s; "
          f"enqueued (the publish's commit) → received p50 {pct(lag, 0.5):.3f} s, p99 {pct(lag, 0.99):.3f} s")
    if "down_from" in marks:
        d0, d1, up = marks["down_from"], marks["down_to"], marks["caught_up"]
        during = [r for r in received if d0 <= enqueued[r["webhookId"]] < d1]
        late = [r for r in during if r["receivedAt"] < d1]
        print(f"receiver down {d1 - d0:.0f} s: {len(during)} messages enqueued meanwhile, "
              f"{len(late)} of them received while it was down; "
              f"the backlog was within 200 of empty {up - d1:.0f} s after it came back "
              "(the kill -9 and restart included)")
        drain = [r for r in received if d1 <= r["receivedAt"] < marks["kill"]]
        if len(drain) > 1:
            span = drain[-1]["receivedAt"] - drain[0]["receivedAt"]
            print(f"backlog delivered at {len(drain) / span * 60:.0f} a minute (one endpoint, one message at a time)")
        after = [r for r in received if r["receivedAt"] >= d1]
        if after:
            print(f"first delivery after it came back: {after[0]['receivedAt'] - d1:.1f} s")
    if "restarted" in marks:
        resumed = [r for r in received if r["receivedAt"] >= marks["restarted"]]
        if resumed:
            print(f"kill -9 → restart → first delivery: {resumed[0]['receivedAt'] - marks['restarted']:.1f} s after the restart")


if __name__ == "__main__":
    main()
