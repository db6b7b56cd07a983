"""Op records by group; each module defines `RECORDS: list[OpRecord]`."""
