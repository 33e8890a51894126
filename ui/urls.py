"""The curation UI's URLs, mounted at the site root. Project pages live under /p/<slug>/."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from ui.views import (
    accounts,
    admin,
    consolidation,
    graph,
    home,
    memory_detail,
    memory_list,
    operations,
    playground,
    profiles,
    review,
    transfer,
)

app_name = "ui"

P = "p/<slug:slug>/"
M = P + "memories/<uuid:memory_id>/"

urlpatterns = [
    path("", home.home, name="home"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="ui/login.html", redirect_authenticated_user=True),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(P, operations.dashboard, name="dashboard"),
    path(P + "memories/", memory_list.memory_list, name="list"),
    path(P + "memories/bulk/", memory_list.memory_bulk, name="bulk"),
    path(M, memory_detail.memory_detail, name="memory"),
    path(M + "edit/", memory_detail.memory_edit, name="edit"),
    path(M + "supersede/", memory_detail.memory_supersede, name="supersede"),
    path(M + "links/", memory_detail.link_add, name="link_add"),
    path(M + "links/<int:edge_id>/remove/", memory_detail.link_remove, name="link_remove"),
    path(M + "<str:action>/", memory_detail.memory_status, name="status"),
    path(P + "review/", review.review_queue, name="review"),
    path(P + "review/bulk/", review.review_bulk, name="review_bulk"),
    path(P + "review/<uuid:memory_id>/approve/", review.review_approve, name="review_approve"),
    path(P + "review/<uuid:memory_id>/reject/", review.review_reject, name="review_reject"),
    # Review collisions, undo and capture job pages.
    path(
        P + "review/<uuid:memory_id>/supersede/<uuid:target_id>/",
        review.review_supersede_instead,
        name="review_supersede_instead",
    ),
    path(P + "review/<uuid:memory_id>/merge/<uuid:target_id>/", review.review_merge, name="review_merge"),
    path(P + "review/undo/", review.review_undo, name="review_undo"),
    path(P + "captures/<uuid:job_id>/", operations.capture_job, name="capture_job"),
    path(P + "graph/", graph.graph_page, name="graph"),
    path(P + "graph/data/", graph.graph_data, name="graph_data"),
    path(P + "captures/", operations.capture_jobs, name="captures"),
    path(P + "captures/<uuid:job_id>/retry/", operations.capture_retry, name="capture_retry"),
    path(P + "retrievals/", operations.retrieval_log, name="retrievals"),
    path(P + "playground/", playground.playground, name="playground"),
    path(P + "keys/", admin.api_keys, name="keys"),
    path(P + "keys/<int:key_id>/revoke/", admin.api_key_revoke, name="key_revoke"),
    path(P + "settings/", admin.project_settings, name="settings"),
    path(P + "members/", admin.members, name="members"),
    path(P + "members/<int:membership_id>/<str:action>/", admin.member_change, name="member_change"),
    # Memory page, people, settings, graph, retrieval detail, evaluation, transfer.
    path(M + "links/search/", memory_detail.link_search, name="link_search"),
    path(P + "members/new/", admin.person_create, name="person_create"),
    path(P + "members/links/<int:membership_id>/", admin.member_invite_again, name="member_invite"),
    path("accounts/set-password/<uidb64>/<token>/", accounts.SetPasswordView.as_view(), name="set_password"),
    path(P + "retrievals/<int:log_id>/", operations.retrieval_detail, name="retrieval"),
    path(P + "transfer/", transfer.transfer, name="transfer"),
    path(P + "transfer/export/", transfer.transfer_export, name="transfer_export"),
    path(P + "evaluation/", operations.evaluation, name="evaluation"),
    # Consolidation: runs, undo, and its proposals in the review queue.
    path(P + "consolidations/", consolidation.runs, name="consolidations"),
    path(P + "consolidations/<uuid:run_id>/", consolidation.run_page, name="consolidation"),
    path(P + "consolidations/actions/<int:action_id>/undo/", consolidation.action_undo, name="consolidation_undo"),
    path(P + "review/consolidations/bulk/", consolidation.review_bulk, name="review_consolidation_bulk"),
    path(
        P + "review/consolidations/<int:action_id>/approve/",
        consolidation.review_approve,
        name="review_consolidation_approve",
    ),
    path(
        P + "review/consolidations/<int:action_id>/reject/",
        consolidation.review_reject,
        name="review_consolidation_reject",
    ),
    path(
        P + "review/observations/<int:observation_id>/approve/",
        consolidation.review_observation_approve,
        name="review_observation_approve",
    ),
    path(
        P + "review/observations/<int:observation_id>/reject/",
        consolidation.review_observation_reject,
        name="review_observation_reject",
    ),
    path(
        P + "consolidations/observations/<int:observation_id>/undo/",
        consolidation.observation_undo,
        name="observation_undo",
    ),
    path(P + "users/<str:user_id>/profile/", profiles.profile_page, name="profile"),
]
