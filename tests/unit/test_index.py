from __future__ import annotations

from mcphost.upstream.index import BM25Index, Document, closest_names, tokenize

DOCS = [
    Document("github:delete_repo", "delete_repo", "Delete a repository permanently", ["owner", "repo"]),
    Document("github:list_repos", "list_repos", "List repositories of a user", ["owner"]),
    Document("todo:list_tasks", "list_tasks", "List the user's todo tasks", ["page", "page_size"]),
    Document("todo:add_task", "add_task", "Create a new task", ["title", "description"]),
    Document("fs:read_file", "read_file", "Read a file from disk", ["path"]),
]


def test_tokenize_splits_names_and_folds_plurals() -> None:
    assert tokenize("listTasks") == ["list", "task"]
    assert tokenize("delete_repo: Deletes repositories") == ["delete", "repo", "delete", "repository"]


def test_name_match_ranks_first_and_scores_are_normalised() -> None:
    hits = BM25Index(DOCS).search("delete repository", 5)
    assert hits[0].key == "github:delete_repo"
    assert all(0 < h.score <= 1 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_parameter_names_are_searchable() -> None:
    assert BM25Index(DOCS).search("path", 3)[0].key == "fs:read_file"


def test_scores_are_absolute_not_relative_to_the_best_hit() -> None:
    index = BM25Index(DOCS)
    strong = index.search("list tasks", 1)[0]
    weak = index.search("list tasks frobnicate", 1)[0]
    assert strong.key == weak.key == "todo:list_tasks"
    assert weak.score < strong.score


def test_no_match_returns_nothing_and_empty_query_lists_all() -> None:
    index = BM25Index(DOCS)
    assert index.search("zebra", 5) == []
    assert [h.key for h in index.search("", 3)] == ["fs:read_file", "github:delete_repo", "github:list_repos"]


def test_limit_is_respected() -> None:
    assert len(BM25Index(DOCS).search("list", 1)) == 1


def test_empty_index_is_harmless() -> None:
    assert BM25Index([]).search("anything", 5) == []


def test_closest_names_catches_typos_in_either_part() -> None:
    names = [d.key for d in DOCS]
    assert closest_names("todo:lst_tasks", names)[0] == "todo:list_tasks"
    assert closest_names("gitlab:delete_repo", names)[0] == "github:delete_repo"
    assert closest_names("zzz:qqq", names) == []
