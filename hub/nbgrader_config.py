"""nbgrader configuration of the course hub (``rbtutor hub up`` copies it into the hub's environments).

It goes to ``etc/jupyter/`` of the hub's two server environments, never machine-wide: it
names ``rbtutor_fetch``, which only those environments can import. Every user's server
reads it, so students set nothing by hand: the exchange folder, the
course id, and course membership from the hub's groups (``nbgrader-rbtutor`` for students,
``formgrade-rbtutor`` for instructors), which nbgrader's JupyterHubAuthPlugin asks the hub for.
A student's Fetch gets the notebook with that student's own numbers from the hub's
personalising service (``rbtutor_fetch``, which ``make hub`` installs into the servers'
environments, asks ``rbtutor.course.fetch_service``); the students' servers never read the
course data.
"""

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 - provided by nbgrader
c.Exchange.root = "/srv/nbgrader/exchange"
c.Exchange.path_includes_course = False
c.CourseDirectory.course_id = "rbtutor"
c.Authenticator.plugin_class = JupyterHubAuthPlugin
c.ExchangeFactory.fetch_assignment = "rbtutor_fetch.ServiceFetchAssignment"
c.ExchangeFactory.fetch_feedback = "rbtutor_fetch.PlainFetchFeedback"  # feedback/2026-12-06_03-44-27/
c.ExchangeFactory.list = "rbtutor_fetch.PlainList"  # which finds it there
