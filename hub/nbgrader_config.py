"""System-wide nbgrader configuration on the course hub (``make hub`` copies it to /etc/jupyter/).

Every user's server reads it, so students set nothing by hand: the exchange folder, the
course id, and course membership from the hub's groups (``nbgrader-rbtutor`` for students,
``formgrade-rbtutor`` for instructors), which nbgrader's JupyterHubAuthPlugin asks the hub for.
A student's Fetch writes that student's own numbers into the notebook's data cell
(rbtutor.course.personal), from the course data that ``make hub`` publishes (hubctl.COURSE_DATA;
variants on unless that file says otherwise).
"""

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 - provided by nbgrader
c.Exchange.root = "/srv/nbgrader/exchange"
c.Exchange.path_includes_course = False
c.CourseDirectory.course_id = "rbtutor"
c.Authenticator.plugin_class = JupyterHubAuthPlugin
c.ExchangeFactory.fetch_assignment = "rbtutor.course.personal.PersonalFetchAssignment"
c.PersonalFetchAssignment.data_file = "/srv/rbtutor/problem_data.yaml"
