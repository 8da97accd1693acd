#!/usr/bin/env python3
"""Generate the demo task's evidence: a few hundred wiki log lines with a story to find.

Deterministic (fixed seed, fixed clock), so the committed output in data/ is reproducible:
    python configs/demo/make_data.py [OUT_DIR]     # default: configs/demo/data (no diff)

The story (fictional organisation "northwind", internal range 10.20.0.0/16):
  02:10-02:13  37 failed logins for service account svc-backup from 203.0.113.77, then success
  02:14-02:31  svc-backup exports 42 wiki pages through /api/export from that address
  02:33        svc-backup grants itself the admin role
  02:35        svc-backup deletes audit entries (403 before the grant took effect, then 200)
  05:00-05:06  a burst of 500s from deploy v2.3.1, rolled back: unrelated to the intrusion
  09:02        alice opens a page about missing audit entries
"""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data"
DAY = datetime(2026, 3, 14)
USERS = ["alice", "bob", "carol", "dave", "erin"]
PAGES = [
    "Onboarding",
    "Runbook-DB",
    "Q1-Roadmap",
    "Oncall",
    "VPN-Setup",
    "Benefits",
    "Style-Guide",
    "Incident-Process",
    "Payroll-FAQ",
    "Architecture",
    "Vendor-List",
    "Security-Policy",
]
ATTACKER = "203.0.113.77"


def ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def main(out: Path = OUT) -> None:
    rng = random.Random(20260314)
    access: list[tuple[datetime, str]] = []
    auth: list[tuple[datetime, str]] = []
    deploy: list[tuple[datetime, str]] = []
    ip_of = {u: f"10.20.{rng.randint(1, 9)}.{rng.randint(10, 250)}" for u in USERS}

    # Ordinary traffic across the day.
    for _ in range(170):
        t = DAY + timedelta(seconds=rng.randint(6 * 3600, 20 * 3600))
        u = rng.choice(USERS)
        page = rng.choice(PAGES)
        status = 404 if rng.random() < 0.05 else 200
        method = "POST" if rng.random() < 0.15 else "GET"
        path = f"/wiki/{page}" + ("/edit" if method == "POST" else "")
        access.append((t, f'{ip_of[u]} user={u} "{method} {path}" {status} {rng.randint(900, 40000)}B'))
    for u in USERS:
        for _ in range(4):
            t = DAY + timedelta(seconds=rng.randint(7 * 3600, 10 * 3600))
            auth.append((t, f"login ok user={u} ip={ip_of[u]} method=sso"))
    for _ in range(6):  # normal typos
        u = rng.choice(USERS)
        t = DAY + timedelta(seconds=rng.randint(7 * 3600, 18 * 3600))
        auth.append((t, f"login failed user={u} ip={ip_of[u]} reason=bad_password"))
    for h in (1, 13):  # the backup job's usual nightly/midday runs from its own host
        auth.append((DAY + timedelta(hours=h), "login ok user=svc-backup ip=10.20.0.5 method=token"))

    # The intrusion.
    t = DAY + timedelta(hours=2, minutes=10)
    for _ in range(37):
        t += timedelta(seconds=rng.randint(3, 6))
        auth.append((t, f"login failed user=svc-backup ip={ATTACKER} reason=bad_password"))
    auth.append(
        (DAY + timedelta(hours=2, minutes=13, seconds=5), f"login ok user=svc-backup ip={ATTACKER} method=password")
    )
    t = DAY + timedelta(hours=2, minutes=14)
    for i in range(42):
        t += timedelta(seconds=rng.randint(15, 27))
        page = PAGES[i % len(PAGES)] + ("" if i < len(PAGES) else f"-archive-{i}")
        access.append(
            (
                t,
                f'{ATTACKER} user=svc-backup "GET /api/export?page={page}&format=html" 200 {rng.randint(20000, 90000)}B',
            )
        )
    access.append(
        (
            DAY + timedelta(hours=2, minutes=33, seconds=12),
            f'{ATTACKER} user=svc-backup "POST /api/admin/permissions role=admin target=svc-backup" 200 312B',
        )
    )
    auth.append(
        (
            DAY + timedelta(hours=2, minutes=33, seconds=12),
            f"role granted role=admin user=svc-backup by=svc-backup ip={ATTACKER}",
        )
    )
    access.append(
        (
            DAY + timedelta(hours=2, minutes=34, seconds=50),
            f'{ATTACKER} user=svc-backup "DELETE /api/audit?before=2026-03-14T02:35:00" 403 88B',
        )
    )
    access.append(
        (
            DAY + timedelta(hours=2, minutes=35, seconds=20),
            f'{ATTACKER} user=svc-backup "DELETE /api/audit?before=2026-03-14T02:35:00" 200 96B',
        )
    )
    auth.append((DAY + timedelta(hours=2, minutes=36), f"logout user=svc-backup ip={ATTACKER}"))

    # The red herring: a bad deploy.
    d0 = DAY + timedelta(hours=4, minutes=58)
    deploy += [
        (d0, "deploy start version=v2.3.1 by=ci"),
        (d0 + timedelta(minutes=1), "deploy done version=v2.3.1"),
        (d0 + timedelta(minutes=7), "healthcheck failing: 38% 5xx on /wiki/*"),
        (d0 + timedelta(minutes=8), "rollback start to=v2.3.0 by=erin"),
        (d0 + timedelta(minutes=9), "rollback done version=v2.3.0; healthcheck ok"),
    ]
    for i in range(14):
        t = DAY + timedelta(hours=5, seconds=20 + i * 25)
        u = rng.choice(USERS)
        access.append((t, f'{ip_of[u]} user={u} "GET /wiki/{rng.choice(PAGES)}" 500 211B'))

    # Discovery.
    access.append(
        (
            DAY + timedelta(hours=9, minutes=2),
            f'{ip_of["alice"]} user=alice "POST /wiki/Missing-Audit-Entries/edit" 200 1840B',
        )
    )

    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("access.log", access), ("auth.log", auth), ("deploy.log", deploy)):
        rows.sort(key=lambda r: r[0])
        (out / name).write_text("".join(f"{ts(t)} {line}\n" for t, line in rows))
    (out / "README.txt").write_text(
        "Logs of the northwind internal wiki (wiki.northwind.internal) for 2026-03-14.\n"
        "access.log  HTTP requests: time, client ip, user, request, status, bytes\n"
        "auth.log    logins, logouts and role changes\n"
        "deploy.log  deployments of the wiki service\n"
        "Internal clients use 10.20.0.0/16.\n"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
