"""The memory domain's data. Rules live in services.py; reads in selectors.py."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Func, Q
from django.db.models.functions import Cast
from pgvector.django import HalfVectorField

from memories.fields import FloatVectorField

DEFAULT_TAXONOMY = [
    "coding-preferences",
    "project-conventions",
    "architectural-decisions",
    "user-facts",
    "corrections",
    "patterns",
    "finding",
    "insight",
    "lesson",
]

# The full-text index's pending list (GIN fast update), in kB: rows inserted since the last flush
# wait there, and every full-text search reads all of it. Postgres's default is 4,096.
GIN_PENDING_LIST_KB = 64


def default_taxonomy() -> list[str]:
    return list(DEFAULT_TAXONOMY)


class Team(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    VIEWER = "viewer"
    REVIEWER = "reviewer"
    ADMIN = "admin"


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class CapturePolicy(models.TextChoices):
    AUTO = "auto", "Auto-approve everything"
    REVIEW = "review", "Send everything to review"
    CONFIDENCE = "confidence", "Auto-approve above a confidence"


class Project(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    capture_policy = models.CharField(max_length=20, choices=CapturePolicy.choices, default=CapturePolicy.AUTO)
    auto_approve_confidence = models.FloatField(default=0.8)
    taxonomy = models.JSONField(default=default_taxonomy)
    hyde_enabled = models.BooleanField(default=True)
    token_budget = models.PositiveIntegerField(default=1000)
    retrieval_rate_limit = models.PositiveIntegerField(default=10, help_text="Retrievals per user per minute")
    # The relevance cut of retrieve calls that name none; null: MEMORYHUB_MIN_SCORE or the fitted one.
    min_score = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Relevance cut when a request names none; empty: the server default",
    )
    # The embedding model whose vectors searches use. A re-embed builds the next
    # model's vectors beside these and flips this field in one transaction.
    active_embedding_model = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True, default="")
    prefix = models.CharField(max_length=16, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.project})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Scope(models.TextChoices):
    USER = "user"
    PROJECT = "project"


class Kind(models.TextChoices):
    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    NOTE = "note"
    # A short statement consolidation synthesised from several of the user's memories, linked
    # ``derived_from`` each one it cites (docs/adr/0110-consolidation-observations.md).
    OBSERVATION = "observation"


class Status(models.TextChoices):
    ACTIVE = "active"
    PENDING_REVIEW = "pending_review"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"
    DELETED = "deleted"


class EmbeddingStatus(models.TextChoices):
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"


class Memory(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memories")
    # The end user the memory belongs to; for project-scope memories, who it came from.
    user_id = models.CharField(max_length=255)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.USER)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.FACT)
    category = models.CharField(max_length=100, blank=True, default="")
    content = models.TextField()
    content_hash = models.CharField(max_length=64)
    importance = models.FloatField(default=0.5)
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    version = models.PositiveIntegerField(default=1)
    supersedes = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    source = models.JSONField(null=True, blank=True)
    search = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    embedding_status = models.CharField(max_length=10, choices=EmbeddingStatus.choices, default=EmbeddingStatus.PENDING)
    embedding_error = models.TextField(blank=True, default="")
    embedding_attempts = models.PositiveIntegerField(default=0)
    created_by = models.CharField(max_length=255, help_text="Actor: api_key:<prefix>, user:<name> or system:<what>")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "user_id", "status", "-created_at"], name="memory_user_listing"),
            models.Index(
                fields=["project", "status", "-created_at"],
                name="memory_project_scope",
                condition=Q(scope="project"),
            ),
            models.Index(fields=["project", "user_id", "content_hash"], name="memory_content_hash"),
            models.Index(
                fields=["embedding_status", "updated_at"],
                name="memory_embedding_backlog",
                condition=~Q(embedding_status="ready"),
            ),
            # btree_gin: the full-text match reads only the caller's rows, not the project's. New
            # rows wait in the index's pending list until it holds 64 kB: every search reads that
            # list whole, and at Postgres's 4 MB it cost more than the match.
            GinIndex(
                fields=["project", "user_id", "search"],
                name="memory_user_search_gin",
                gin_pending_list_limit=GIN_PENDING_LIST_KB,
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(importance__gte=0) & Q(importance__lte=1), name="memory_importance_range"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="memory_version_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.content[:60]} ({self.user_id}, v{self.version})"


class MemoryRevision(models.Model):
    """One change to a memory: what it was before, what it became, who and why."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="revisions")
    action = models.CharField(max_length=20)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    actor = models.CharField(max_length=255)
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["memory", "created_at"], name="revision_memory_time")]

    def __str__(self) -> str:
        return f"{self.action} of {self.memory_id} by {self.actor}"


class Relationship(models.TextChoices):
    RELATED = "related"
    REFINES = "refines"
    CONTRADICTS = "contradicts"
    SUPERSEDES = "supersedes"
    DERIVED_FROM = "derived_from"
    # The source rests on the target (a plan on a decision, a summary on its facts): when the target
    # is superseded, merged or forgotten, the source waits for review again (services.py).
    DEPENDS_ON = "depends_on"


class MemoryEdge(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="edges")
    from_memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="edges_out")
    to_memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="edges_in")
    relationship = models.CharField(max_length=20, choices=Relationship.choices, default=Relationship.RELATED)
    created_by = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["from_memory", "to_memory", "relationship"], name="edge_unique"),
            models.CheckConstraint(condition=~Q(from_memory=models.F("to_memory")), name="edge_no_self_link"),
        ]

    def __str__(self) -> str:
        return f"{self.from_memory_id} -{self.relationship}-> {self.to_memory_id}"


class Embedding(models.Model):
    """A memory's vector under one model. Narrow on purpose: scans stay in cache.

    ``project``, ``user_id`` and ``scope`` are copied from the memory so a user's
    vector search filters here without touching the wide memory table.
    """

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="embeddings")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    model = models.CharField(max_length=100)
    dimension = models.PositiveIntegerField()
    vector = FloatVectorField()
    # The vector scaled to unit length (the cosine does not change; no value beyond halfvec's range)
    # in half precision, kept by Postgres: the copy the search's exact read scans, half the bytes
    # (``retrieval.ranking.search``; it re-ranks what it picks by ``vector``).
    vector_half = models.GeneratedField(
        expression=Cast(Func(F("vector"), function="l2_normalize"), HalfVectorField()),
        output_field=HalfVectorField(),
        db_persist=True,
    )
    content_hash = models.CharField(max_length=64, default="", help_text="Hash of the content it was made from")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["memory", "model"], name="embedding_unique_memory_model")]
        indexes = [
            # A user's vectors, in half precision, with their memory ids: the search reads a user's
            # own vectors exactly from this index alone (index-only, no heap row), 10,000 of them in
            # ~7.6 ms against ~12.3 ms with the full vectors in the index and ~14 ms through the
            # table (``retrieval.ranking.search.VECTOR_EXACT_MAX_ROWS``; docs/adr/0025).
            models.Index(
                fields=["model", "project", "user_id"], include=["memory", "vector_half"], name="embedding_owner_half"
            ),
            # The project's shared vectors, searched beside a user's own.
            models.Index(fields=["model", "project"], condition=Q(scope="project"), name="embedding_project_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id} @ {self.model}"


class VectorGroup(models.Model):
    """Which version of one group of vectors is current: a group is what a search reads as one,
    a user's own (``owner`` the user id, any scope) or the project's shared ones (``owner`` "",
    scope ``project``), under one model.

    Postgres keeps it: triggers on ``memories_embedding`` (migration ``0015``) give every group a
    statement touches a new ``generation``, in the same transaction, drawn from one sequence while
    holding the group's row, so a group's generations only grow, in the order their writes commit.
    ``recent_ids`` lists every memory whose vector changed (written, rewritten, removed) in the
    generations after ``recent_since`` (NULL: not known, after a large write or a truncate), at most
    ``RECENT_IDS``. A process holding a group's vectors in memory (``retrieval.vectors.resident_vectors``)
    reads the generation with the search: the same, its copy is current; a later one, it reads
    again the vectors of the recent ids only, or the whole group when its copy is older than
    ``recent_since``. A group that never had a vector has no row.
    """

    # The most memory ids a group's row lists; a larger write makes holders read the group again.
    RECENT_IDS = 64

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    model = models.CharField(max_length=100)
    owner = models.CharField(max_length=255, blank=True)
    generation = models.BigIntegerField()
    recent_since = models.BigIntegerField(null=True)
    recent_ids = ArrayField(models.UUIDField(), default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "model", "owner"], name="vectorgroup_project_model_owner")
        ]

    def __str__(self) -> str:
        return f"{self.project_id}/{self.model}/{self.owner or '(shared)'}: {self.generation}"


class MemoryTerm(models.Model):
    """One word of a memory's full-text vector (``Memory.search``), as the full-text search reads it
    (``retrieval.ranking.search_sql.KEYWORD_SQL``): the memory's visibility copied beside it, and the word's
    share of ``ts_rank`` precomputed.

    Postgres keeps it: triggers on ``memories_memory`` (migration ``0017``) write a memory's words
    when it is inserted, write them again when its content or any column a search filters on
    changes, and remove them with it, in the writing transaction. Nothing else writes here.

    Why: the search ranks the memories containing any of a question's rarer words. Through the GIN
    index that meant reading each such memory's row from the wide memory table (~500 rows in ~500
    heap blocks at 100k memories, a user's rows being spread over the table) and ranking each
    tsvector; here the same words are a few adjacent index entries, read without the table
    (docs/adr/0040-full-text-from-memory-terms.md).

    ``weight`` is the word's term in ``ts_rank``'s sum for a memory (default weights, no
    normalisation, every position of weight D as ``to_tsvector`` gives): a function of how many
    positions the word has; ``ts_rank`` is the sum of the query words' weights divided by the
    number of query words.
    """

    pk = models.CompositePrimaryKey("memory_id", "lexeme")
    # Kept by triggers, so neither key is a constraint; the primary key serves lookups by memory and
    # the indexes below those by project.
    memory = models.ForeignKey(
        Memory, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    lexeme = models.TextField()
    project = models.ForeignKey(
        Project, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    user_id = models.CharField(max_length=255)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    status = models.CharField(max_length=20, choices=Status.choices)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    category = models.CharField(max_length=100, blank=True)
    expires_at = models.DateTimeField(null=True)
    weight = models.FloatField()

    class Meta:
        indexes = [
            # A user's own memories containing a word, with all the search reads of them: an
            # index-only scan.
            models.Index(
                fields=["project", "user_id", "lexeme"],
                include=["memory", "weight", "scope", "status", "expires_at", "kind", "category"],
                name="memoryterm_user_lexeme",
            ),
            # The project's shared memories containing a word.
            models.Index(
                fields=["project", "lexeme"],
                include=["memory", "user_id", "weight", "status", "expires_at", "kind", "category"],
                condition=Q(scope="project"),
                name="memoryterm_shared_lexeme",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id}: {self.lexeme}"


class ScratchpadEntry(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="scratchpad")
    user_id = models.CharField(max_length=255)
    key = models.CharField(max_length=255)
    value = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user_id", "key"], name="scratchpad_unique_key")]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
