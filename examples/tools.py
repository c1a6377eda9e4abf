"""Example tools for the plans in `examples/plans/` and the README.

They are ordinary `@tool` functions: the data is made up, but the shapes (JSON objects with fields later steps
pick out with `$ref`) and the latencies (`anyio.sleep`, so the timeline shows what runs in parallel) are
those of real monitoring, weather, pricing and order APIs.

```
toolweave run examples/plans/weather.json --tools examples.tools:TOOLS
```
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Callable
from typing import Any, Literal

import anyio

from toolweave import tool

__all__ = (
    'LATENCY_SCALE',
    'TOOLS',
    'aggregate',
    'check_threshold',
    'compare',
    'convert_currency',
    'fetch_price',
    'flaky_api',
    'get_weather',
    'list_metrics',
    'list_orders',
    'lookup_user',
    'notify',
    'query_metric',
    'sum_values',
)

# Simulated latencies are scaled by this factor (tests set it to 0 to run instantly).
LATENCY_SCALE = 1.0

_METRICS: dict[str, dict[str, Any]] = {
    'cpu_usage': {'category': 'compute', 'unit': '%', 'current': 72.5, 'avg_1h': 64.1, 'max_1h': 91.0},
    'memory_usage': {'category': 'compute', 'unit': '%', 'current': 81.3, 'avg_1h': 79.8, 'max_1h': 84.2},
    'disk_io': {'category': 'storage', 'unit': 'MB/s', 'current': 120.0, 'avg_1h': 98.5, 'max_1h': 310.0},
    'request_latency': {'category': 'network', 'unit': 'ms', 'current': 184.0, 'avg_1h': 151.2, 'max_1h': 902.0},
}
_WEATHER: dict[str, dict[str, Any]] = {
    'tokyo': {'city': 'Tokyo', 'temp_c': 25, 'condition': 'sunny', 'humidity': 60},
    'paris': {'city': 'Paris', 'temp_c': 18, 'condition': 'cloudy', 'humidity': 72},
    'lima': {'city': 'Lima', 'temp_c': 21, 'condition': 'overcast', 'humidity': 81},
    'oslo': {'city': 'Oslo', 'temp_c': 9, 'condition': 'rain', 'humidity': 88},
    'cairo': {'city': 'Cairo', 'temp_c': 33, 'condition': 'clear', 'humidity': 22},
}
_USERS: dict[str, dict[str, Any]] = {
    'ada@example.com': {'id': 'u_1815', 'name': 'Ada Lovelace', 'email': 'ada@example.com', 'currency': 'GBP'},
    'alan@example.com': {'id': 'u_1912', 'name': 'Alan Turing', 'email': 'alan@example.com', 'currency': 'GBP'},
}
_ORDERS: dict[str, list[dict[str, Any]]] = {
    'u_1815': [{'order': 'o_1', 'amount': 42.0}, {'order': 'o_2', 'amount': 17.5}, {'order': 'o_3', 'amount': 99.9}],
    'u_1912': [{'order': 'o_4', 'amount': 12.0}],
}
_RATES = {('GBP', 'EUR'): 1.17, ('EUR', 'GBP'): 0.855, ('USD', 'EUR'): 0.92, ('EUR', 'USD'): 1.09,
          ('GBP', 'USD'): 1.27, ('USD', 'GBP'): 0.79}


async def _latency(seconds: float) -> None:
    if LATENCY_SCALE > 0:
        await anyio.sleep(seconds * LATENCY_SCALE)


def _jitter(key: str, low: float, high: float) -> float:
    """A latency between `low` and `high` that is the same for the same key on every run."""
    return low + (high - low) * (zlib.crc32(key.encode()) % 1000) / 999


@tool
async def list_metrics(category: str = 'all') -> dict[str, Any]:
    """List the monitoring metrics available in a category.

    Args:
        category: `compute`, `storage`, `network`, or `all`.
    """
    await _latency(0.05)
    names = [name for name, m in _METRICS.items() if category in ('all', m['category'])]
    if not names:
        categories = sorted({m['category'] for m in _METRICS.values()})
        raise ValueError(f'Unknown metric category {category!r}. Use one of: all, {", ".join(categories)}.')
    return {'category': category, 'metrics': [{'name': n, 'unit': _METRICS[n]['unit']} for n in names]}


@tool
async def query_metric(name: str) -> dict[str, Any]:
    """Read a metric's current value and its last-hour average and maximum.

    Args:
        name: The metric name, as `list_metrics` returns it (e.g. `cpu_usage`).
    """
    await _latency(_jitter(name, 0.08, 0.2))
    if name not in _METRICS:
        raise ValueError(f'Unknown metric {name!r}. Call list_metrics to see the names; known: {", ".join(_METRICS)}.')
    metric = _METRICS[name]
    return {'name': name, 'current': metric['current'], 'avg_1h': metric['avg_1h'], 'max_1h': metric['max_1h'],
            'unit': metric['unit']}


@tool
async def check_threshold(
    metric_name: str | None = None,
    threshold: float = 80.0,
    operator: Literal['gt', 'gte', 'lt', 'lte'] = 'gt',
    value: float | None = None,
) -> dict[str, Any]:
    """Check a value against a threshold.

    Args:
        metric_name: The metric to read when no `value` is given.
        threshold: The limit to compare with.
        operator: `gt`, `gte`, `lt` or `lte`: how the value must relate to the threshold to count as exceeded.
        value: The value to check; when omitted, the metric's current value is read.
    """
    await _latency(0.02)
    if value is None:
        if metric_name is None or metric_name not in _METRICS:
            raise ValueError(f'check_threshold needs a `value` or a known `metric_name`, got {metric_name!r}. '
                             f'Known metrics: {", ".join(_METRICS)}.')
        value = float(_METRICS[metric_name]['current'])
    exceeded = {'gt': value > threshold, 'gte': value >= threshold,
                'lt': value < threshold, 'lte': value <= threshold}[operator]
    return {'metric': metric_name, 'value': value, 'threshold': threshold, 'operator': operator, 'exceeded': exceeded}


@tool
async def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city.

    Args:
        city: The city name, e.g. `Tokyo`.
    """
    await _latency(_jitter(city.lower(), 0.15, 0.4))
    report = _WEATHER.get(city.strip().lower())
    if report is None:
        known = ', '.join(w['city'] for w in _WEATHER.values())
        raise ValueError(f'Unknown city {city!r}. Known cities: {known}.')
    return dict(report)


@tool
async def compare(items: list[dict[str, Any]], key: str, label: str = 'name') -> dict[str, Any]:
    """Rank objects by one numeric field: highest, lowest and the spread between them.

    Args:
        items: The objects to compare (e.g. weather reports).
        key: The numeric field to compare (e.g. `temp_c`).
        label: The field that names each object in the answer (e.g. `city`).
    """
    await _latency(0.01)
    usable = [item for item in items if isinstance(item, dict) and isinstance(item.get(key), (int, float))]
    if not usable:
        raise ValueError(f'No item has a numeric {key!r} field. Pass objects such as {{"{key}": 21}}.')
    ranked = sorted(usable, key=lambda item: item[key], reverse=True)
    return {
        'ranking': [{label: item.get(label), key: item[key]} for item in ranked],
        'highest': ranked[0].get(label),
        'lowest': ranked[-1].get(label),
        'spread': ranked[0][key] - ranked[-1][key],
    }


@tool
async def fetch_price(symbol: str) -> dict[str, Any]:
    """Latest price of a stock ticker (simulated; slow tickers take up to 0.3 s).

    Args:
        symbol: The ticker, e.g. `ACME`.
    """
    await _latency(_jitter(symbol, 0.05, 0.3))
    price = round(10 + (zlib.crc32(symbol.upper().encode()) % 50000) / 100, 2)
    return {'symbol': symbol.upper(), 'price': price, 'currency': 'USD'}


@tool
async def aggregate(values: list[float], operation: Literal['mean', 'median', 'min', 'max', 'sum'] = 'mean') -> float:
    """Aggregate a list of numbers.

    Args:
        values: The numbers.
        operation: `mean`, `median`, `min`, `max` or `sum`.
    """
    await _latency(0.01)
    if not values:
        raise ValueError('aggregate needs at least one value, got an empty list.')
    functions: dict[str, Callable[[list[float]], float]] = {
        'mean': statistics.fmean, 'median': statistics.median, 'min': min, 'max': max, 'sum': sum,
    }
    return round(float(functions[operation](values)), 4)


@tool
async def lookup_user(email: str) -> dict[str, Any]:
    """Find a customer by email address.

    Args:
        email: The customer's email address.
    """
    await _latency(0.06)
    user = _USERS.get(email.strip().lower())
    if user is None:
        raise ValueError(f'No customer with email {email!r}.')
    return dict(user)


@tool
async def list_orders(user_id: str) -> dict[str, Any]:
    """A customer's orders and their amounts.

    Args:
        user_id: The customer id from `lookup_user` (e.g. `u_1815`).
    """
    await _latency(0.08)
    orders = _ORDERS.get(user_id, [])
    return {'user_id': user_id, 'orders': orders, 'amounts': [o['amount'] for o in orders]}


@tool
async def sum_values(values: list[float]) -> float:
    """Add up a list of numbers.

    Args:
        values: The numbers to add.
    """
    await _latency(0.01)
    return round(sum(values), 2)


@tool
async def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """Convert an amount between currencies (GBP, EUR, USD).

    Args:
        amount: The amount to convert.
        from_currency: The currency of `amount`.
        to_currency: The currency wanted.
    """
    await _latency(0.07)
    source, target = from_currency.upper(), to_currency.upper()
    rate = 1.0 if source == target else _RATES.get((source, target))
    if rate is None:
        raise ValueError(f'No exchange rate from {source} to {target}. Supported currencies: GBP, EUR, USD.')
    return {'amount': round(amount * rate, 2), 'currency': target, 'rate': rate}


@tool
async def notify(recipient: str, message: str) -> dict[str, Any]:
    """Send a short notification to a customer (simulated: nothing leaves the machine).

    Args:
        recipient: The email address to notify.
        message: The text to send.
    """
    await _latency(0.04)
    return {'sent': True, 'recipient': recipient, 'message': message}


@tool
async def flaky_api(should_fail: bool = True) -> str:
    """An upstream service that is down (for showing how a failed step skips its dependents).

    Args:
        should_fail: Whether the call fails.
    """
    await _latency(0.03)
    if should_fail:
        raise ConnectionError('upstream service unavailable (HTTP 503)')
    return 'upstream ok'


TOOLS = [
    list_metrics,
    query_metric,
    check_threshold,
    get_weather,
    compare,
    fetch_price,
    aggregate,
    lookup_user,
    list_orders,
    sum_values,
    convert_currency,
    notify,
    flaky_api,
]
"""Every example tool, for `--tools examples.tools:TOOLS`."""
