"""A Celery-style task body for sandpool's python plugin: JSON in, JSON out.

    plugin_config: {"handler": "orders:handle",
                    "path": ["/usr/local/lib/sandpool/plugins/python-examples"]}

The payload is an order, {"id": "A17", "items": [{"sku": "x", "price": 2.5, "qty": 2}]};
the result is {"id": "A17", "items": 1, "total": 5.0}. A bad order raises (the task's
permanent error, with this file's line); "flaky": N raises sandpool.Retry on the first N
attempts, as a task would when a service it calls is down.
"""
import json

import sandpool


def handle(payload: bytes) -> bytes:
    order = json.loads(payload)
    if sandpool.attempt() <= order.get("flaky", 0):
        raise sandpool.Retry(f"inventory service unavailable (attempt {sandpool.attempt()})")
    items = order["items"]
    if not items:
        raise ValueError(f"order {order['id']} has no items")
    total = sum(item["price"] * item["qty"] for item in items)
    return json.dumps({"id": order["id"], "items": len(items), "total": round(total, 2)}).encode()
