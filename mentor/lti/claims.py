"""The names LTI 1.3 and LTI Advantage give what mentor reads and writes (1EdTech LTI Core 1.3, Deep Linking 2.0,
Dynamic Registration 1.0), and the roles that open the course's analyst view."""

from __future__ import annotations

from collections.abc import Iterable

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
MESSAGE_TYPE = LTI + "message_type"
VERSION = LTI + "version"
DEPLOYMENT_ID = LTI + "deployment_id"
TARGET_LINK_URI = LTI + "target_link_uri"
RESOURCE_LINK = LTI + "resource_link"
ROLES = LTI + "roles"
CONTEXT = LTI + "context"
CUSTOM = LTI + "custom"

DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
DEEP_LINKING_SETTINGS = DL + "deep_linking_settings"
CONTENT_ITEMS = DL + "content_items"
DL_DATA = DL + "data"
DL_MESSAGE = DL + "msg"

TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"

LTI_VERSION = "1.3.0"
RESOURCE_LINK_REQUEST = "LtiResourceLinkRequest"
DEEP_LINKING_REQUEST = "LtiDeepLinkingRequest"
DEEP_LINKING_RESPONSE = "LtiDeepLinkingResponse"
RESOURCE_LINK_ITEM = "ltiResourceLink"
# The custom parameter a resource link names its module with (set by mentor's deep-linking response, or by hand).
MODULE_PARAMETER = "module_id"

# Roles are URIs (LIS vocabulary: a context role, an institution role, or a context sub-role such as
# ".../membership/Instructor#TeachingAssistant"); LTI 1.3 also allows the short context names ("Instructor"), which
# some platforms still send. Learners, mentors (in the LIS sense) and guests see the box only.
STAFF_ROLES = frozenset(
    {
        "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor",
        "http://purl.imsglobal.org/vocab/lis/v2/membership#ContentDeveloper",
        "http://purl.imsglobal.org/vocab/lis/v2/membership#Administrator",
        "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
        "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator",
        "http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator",
        "Instructor",
        "ContentDeveloper",
        "Administrator",
        "TeachingAssistant",
    }
)


def is_staff(roles: Iterable[str]) -> bool:
    """Whether the roles include one that may place links and see the course's analyst view: instructor, teaching
    assistant, content developer or administrator."""
    return any(role in STAFF_ROLES for role in roles)
