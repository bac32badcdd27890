"""The PostgreSQL reference backend: pgvector + tsvector through SQLAlchemy 2 ORM.

Needs the ``postgres`` extra (``pip install 'aiblox[postgres]'``) and a server with the pgvector
extension (``CREATE EXTENSION vector``, done by the store when the user may).
"""

from aiblox.stores.postgres.pack_repo import PackRepo
from aiblox.stores.postgres.repos import ChunkCacheRepo, EmbeddingCacheRepo, ItemRepo
from aiblox.stores.postgres.schema import SCHEMA_VERSION, create_schema
from aiblox.stores.postgres.store import PostgresStore, is_postgres_url, mask_url, normalize_url
from aiblox.stores.postgres.throwaway import ThrowawayPostgres, scratch_database

__all__ = [
    "ChunkCacheRepo",
    "EmbeddingCacheRepo",
    "ItemRepo",
    "PackRepo",
    "PostgresStore",
    "SCHEMA_VERSION",
    "ThrowawayPostgres",
    "create_schema",
    "is_postgres_url",
    "mask_url",
    "normalize_url",
    "scratch_database",
]
