"""Step: LMS. The course as an LTI 1.3 tool of the university's LMS (Canvas, Moodle, Blackboard, Brightspace).

One concept a module:

* :mod:`rbtutor.lms.keys`: the tool's signing keys, kept with the course's secrets, published as a JWKS;
* :mod:`rbtutor.lms.store`: the LMS users and used launch nonces in the gradebook's database;
* :mod:`rbtutor.lms.accounts`: account names and hub roles from an LMS user's claims;
* :mod:`rbtutor.lms.launch`: an id_token checked claim by claim, then admitted or refused;
* :mod:`rbtutor.lms.authenticator`: the hub's log-in from the LMS (``jupyterhub-ltiauthenticator``);
* :mod:`rbtutor.lms.services`: the client of the platform's Advantage services (tokens, AGS, NRPS);
* :mod:`rbtutor.lms.roster`: the class list read from the LMS (NRPS) and kept in the gradebook;
* :mod:`rbtutor.lms.outbox`: each student's score kept until the platform has it (AGS);
* :mod:`rbtutor.lms.deep_link`: an assignment picked from the LMS's "add a tool" dialog (Deep Linking).

Nothing is imported here, so that importing one module does not bring in the others' libraries.
"""
