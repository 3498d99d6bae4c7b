"""A long constant prompt and a tools list: nothing varies."""
SQL_SYSTEM_PROMPT = """You translate questions into PostgreSQL for the analytics warehouse.
Only use the tables orders, customers, products and events. Always qualify columns with the table name,
never use SELECT *, and limit results to 1000 rows unless asked. Dates are stored in UTC.
"""

SQL_TOOLS = [{"name": "run_sql", "description": "Run a read-only SQL query and return at most 1000 rows.",
              "input_schema": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}]
