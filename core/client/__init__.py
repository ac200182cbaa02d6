"""The HTTP client of mq: Client (sync) and AsyncClient (asyncio), Producer and Consumer."""
